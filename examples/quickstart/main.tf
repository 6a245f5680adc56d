# Quick start: a workspace on the embedded engine, a CPU compute cluster that scales from
# zero for jobs and back to zero when idle, a Python environment for its jobs, and the GPU
# sizes a compute cluster could use. `make demo` applies this module offline (dev_overrides, no `terraform init`).
#
# The engine starts by itself on first use, keeps its state under MLCOMPUTE_HOME (default
# ~/.local/share/mlcompute), and exits after 10 idle minutes.

terraform {
  required_providers {
    mlcompute = {
      source = "mlcompute/mlcompute"
    }
  }
}

provider "mlcompute" {}

variable "workspace_name" {
  description = "Name of the workspace to create."
  type        = string
  default     = "quickstart"
}

resource "mlcompute_workspace" "this" {
  name        = var.workspace_name
  description = "Quick start workspace on the embedded engine."

  tags = {
    team    = "ml-platform"
    purpose = "quickstart"
  }

  # vCPU limits per VM family. GPU families that need approval (like NCSv3) start at 0,
  # so a workspace must raise them before it can use those sizes.
  quotas = {
    standardDSv2Family  = 32
    standardNCSv3Family = 48
  }
}

# A CPU cluster that costs nothing when idle: no node until a job needs one, and idle nodes
# are released 10 seconds after their last job (the default is PT120S).
#   mlcompute job submit --workspace quickstart --compute cpu-cluster --code job --stream -- sh train.sh
resource "mlcompute_compute_cluster" "cpu" {
  name         = "cpu-cluster"
  workspace_id = mlcompute_workspace.this.id
  vm_size      = "Standard_DS3_v2"

  scale_settings = {
    min_node_count                       = 0
    max_node_count                       = 2
    scale_down_nodes_after_idle_duration = "PT10S"
  }
}

# A Python environment for jobs, built offline from the wheel in ./wheels (no package index
# needed). The engine builds it on a job's node the first time a job names it (the job shows
# `Preparing`, "building environment"), keeps it per content hash and machine, and later jobs
# start at once:
#   mlcompute job submit --workspace quickstart --compute cpu-cluster --environment quickstart-env --code job --stream -- python evaluate.py
resource "mlcompute_environment" "python" {
  name         = "quickstart-env"
  workspace_id = mlcompute_workspace.this.id

  python = {
    requirements = ["quickstart-model==0.1.0"]
    # An absolute path: the build runs on the node, not in this directory.
    find_links = [abspath("${path.module}/wheels")]
  }
}

# GPU sizes that compute clusters can use (retired series are left out by default).
data "mlcompute_vm_sizes" "gpu" {
  compute_type = "ComputeCluster"
  min_gpus     = 1
}

output "workspace_id" {
  description = "ID of the workspace, for import and for computes in it."
  value       = mlcompute_workspace.this.id
}

output "cluster_id" {
  description = "ID of the CPU cluster; jobs name it by its name, cpu-cluster."
  value       = mlcompute_compute_cluster.cpu.id
}

output "environment_content_hash" {
  description = "Content hash of the environment's inputs: jobs' builds are kept under it."
  value       = mlcompute_environment.python.content_hash
}

output "workspace_quotas" {
  description = "vCPU limits per VM family set on the workspace."
  value       = mlcompute_workspace.this.quotas
}

output "gpu_cluster_size_count" {
  description = "How many current GPU sizes compute clusters can use."
  value       = length(data.mlcompute_vm_sizes.gpu.sizes)
}

output "gpu_sizes_within_quota" {
  description = "GPU sizes of which the workspace's quotas allow at least one node: name => GPUs, model, vCPUs."
  value = {
    for s in data.mlcompute_vm_sizes.gpu.sizes :
    s.name => "${s.gpus} x ${s.gpu_model}, ${s.vcpus} vCPUs"
    if lookup(mlcompute_workspace.this.quotas, s.family, 0) >= s.vcpus
  }
}
