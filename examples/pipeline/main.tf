# A pipeline over three compute targets, on the embedded engine: prep on the compute
# cluster "cpu", train on serverless, score on the compute instance "dev". Its model feeds
# the online endpoint of ../train-and-serve, which this configuration uses as a module (the
# workspace "mlops", the cluster "cpu" and the endpoint "churn" are declared there).
# Python's standard library is all the steps need. README.md walks through it:
#
#   terraform get                 # installs the module (or terraform init without dev_overrides)
#   terraform apply               # the workspace, the cluster and the compute instance
#   job=$(mlcompute job submit -f pipeline.yaml --workspace mlops)
#   mlcompute job show --workspace mlops "$job"                # the steps as a tree
#   terraform apply -var model_job="$job"                     # the endpoint serves its model
#   mlcompute endpoint invoke --workspace mlops churn --data '{"data": [[0.5, 4, 1.0]]}'

terraform {
  required_providers {
    mlcompute = {
      source = "mlcompute/mlcompute"
    }
  }
}

provider "mlcompute" {}

variable "model_job" {
  description = "The pipeline job whose output \"model\" the endpoint serves; null for no endpoint yet."
  type        = string
  default     = null
}

# The workspace "mlops", the cluster "cpu" (where prep runs) and, once model_job is set,
# the endpoint "churn" serving azureml://jobs/<model_job>/outputs/model.
module "train_and_serve" {
  source    = "../train-and-serve"
  model_job = var.model_job
}

# Where score runs: a compute instance kept running (no idle shutdown), as a team's
# evaluation box would be. A step on a stopped instance fails, naming it; start it with
# mlcompute compute start --workspace mlops dev.
resource "mlcompute_compute_instance" "dev" {
  name         = "dev"
  workspace_id = module.train_and_serve.workspace_id
  vm_size      = "Standard_DS2_v2"
  description  = "Scores the churn pipeline's models."
}

# train runs on serverless: nothing to declare; the step's resources.instance_type
# (Standard_DS2_v2) is the size of the node made for it, gone when it ends.

# Every night at 02:00 UTC the same pipeline runs by itself, as churn-nightly-<tick>. Its
# code and data are snapshotted at apply: an edit of a step's script plans an update in
# place of this schedule, and a run reuses every step whose inputs did not change. While
# the schedule is enabled it keeps the embedded engine running.
resource "mlcompute_schedule" "nightly" {
  name         = "churn-nightly"
  workspace_id = module.train_and_serve.workspace_id
  trigger = {
    type       = "cron"
    expression = "0 2 * * *"
    time_zone  = "UTC"
  }
  create_job = file("${path.module}/pipeline.yaml")
  base_path  = path.module

  # The steps run on the cluster (in the module) and on the instance.
  depends_on = [module.train_and_serve, mlcompute_compute_instance.dev]
}

output "scoring_uri" {
  value = module.train_and_serve.scoring_uri
}

output "model_digest" {
  description = "The manifest digest of the model the endpoint serves: the pipeline output's."
  value       = module.train_and_serve.model_digest
}

output "primary_key" {
  value     = module.train_and_serve.primary_key
  sensitive = true
}
