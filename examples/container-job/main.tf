# A job that runs in a container image on the embedded engine's local nodes: README.md says
# how to make the archive and run it.
terraform {
  required_providers {
    mlcompute = { source = "mlcompute/mlcompute" }
  }
}

provider "mlcompute" {}

variable "image_archive" {
  description = "An OCI or Docker archive of the image the job runs in (docker save -o images/train.tar python:3.12-slim)."
  type        = string
  default     = "images/train.tar"
}

resource "mlcompute_workspace" "lab" {
  name = "containers"
}

resource "mlcompute_compute_cluster" "cpu" {
  name         = "cpu"
  workspace_id = mlcompute_workspace.lab.id
  vm_size      = "Standard_DS3_v2"
  scale_settings = {
    max_node_count                       = 2
    scale_down_nodes_after_idle_duration = "PT120S"
  }
}

# The provider reads the archive at plan (its image's digest is in content_hash) and
# uploads it to the engine at apply; each machine imports it once.
resource "mlcompute_environment" "image" {
  name         = "image"
  workspace_id = mlcompute_workspace.lab.id
  container    = { image_archive = var.image_archive }
}

output "environment_content_hash" {
  value = mlcompute_environment.image.content_hash
}
