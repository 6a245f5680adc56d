# Train a tiny model in a job, download it, and serve it from an online endpoint through
# model_path, on the embedded engine. Python's standard library is all it needs.
#
#   terraform init                # or nothing, with dev_overrides
#   terraform apply               # the workspace "mlops" and the cluster "cpu"
#   job=$(mlcompute job submit -f train/job.yaml --workspace mlops)
#   mlcompute job logs --workspace mlops "$job" --follow
#   mlcompute job download --workspace mlops "$job" --output-name model --download-path ./downloaded
#   terraform apply -var model_job="$job"        # the endpoint serves the job's model
#   mlcompute endpoint invoke --workspace mlops churn --data '{"data": [[0.5, 4, 1.0]]}'
#
# Retraining (new rows in train/data.csv, other epochs) is a new job and a new model; the
# plan shows the deployment's new model_digest, and the apply rolls it out before traffic
# moves, without failing a request:
#
#   job=$(mlcompute job submit -f train/job.yaml --workspace mlops)
#   terraform apply -var model_job="$job"

terraform {
  required_providers {
    mlcompute = {
      source = "mlcompute/mlcompute"
    }
  }
}

provider "mlcompute" {}

variable "model_job" {
  description = "The name of the training job whose output \"model\" the endpoint serves; null for no endpoint yet."
  type        = string
  default     = null
}

resource "mlcompute_workspace" "mlops" {
  name = "mlops"
}

# Where the training job runs: one node at most, gone two minutes after the job.
resource "mlcompute_compute_cluster" "cpu" {
  name         = "cpu"
  workspace_id = mlcompute_workspace.mlops.id
  vm_size      = "Standard_DS3_v2"
  scale_settings = {
    min_node_count                       = 0
    max_node_count                       = 1
    scale_down_nodes_after_idle_duration = "PT2M"
  }
}

resource "mlcompute_online_endpoint" "churn" {
  count = var.model_job == null ? 0 : 1

  name         = "churn"
  workspace_id = mlcompute_workspace.mlops.id
  deployments = {
    blue = {
      instance_type  = "Standard_DS2_v2"
      instance_count = 1
      code_path      = "${path.module}/serve"
      command        = ["python3", "score.py"]
      # The job's registered output: the plan takes its manifest digest as model_digest,
      # and each instance finds its files in AZUREML_MODEL_DIR.
      model_path = "azureml://jobs/${var.model_job}/outputs/model"
      readiness_probe = {
        initial_delay = "PT0S"
        period        = "PT1S"
      }
    }
  }
  traffic = { blue = 100 }
}

output "scoring_uri" {
  value = one(mlcompute_online_endpoint.churn[*].scoring_uri)
}

output "model_digest" {
  value = one(mlcompute_online_endpoint.churn[*].deployments.blue.model_digest)
}

output "primary_key" {
  value     = one(mlcompute_online_endpoint.churn[*].primary_key)
  sensitive = true
}

output "workspace_id" {
  description = "The workspace's ID, for computes and jobs beside this example's (../pipeline uses it)."
  value       = mlcompute_workspace.mlops.id
}
