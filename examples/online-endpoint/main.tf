# An online endpoint that serves a model written with Python's standard library alone
# (scorer/score.py), rolled out blue/green with the module in ../modules/blue-green.
#
#   terraform apply                                   # blue serves 100%
#   terraform apply -var green_code=scorer -var green_version=v2 -var green_traffic=20
#   mlcompute endpoint invoke --workspace serving churn --data '{"data": [[1, 2, 3]]}'
#
# The engine starts python3 with PORT set, waits for GET / to answer (the readiness probe),
# and only then sends it traffic.

terraform {
  required_providers {
    mlcompute = {
      source = "mlcompute/mlcompute"
    }
  }
}

provider "mlcompute" {}

variable "green_code" {
  description = "Code directory of the green version, or null for none."
  type        = string
  default     = null
}

variable "green_version" {
  description = "MODEL_VERSION of the green version."
  type        = string
  default     = "v2"
}

variable "green_traffic" {
  description = "Percent of live traffic for green."
  type        = number
  default     = 0
}

resource "mlcompute_workspace" "serving" {
  name = "serving"
}

module "churn" {
  source = "../modules/blue-green"

  name         = "churn"
  workspace_id = mlcompute_workspace.serving.id

  blue = {
    code_path             = "${path.module}/scorer"
    command               = ["python3", "score.py"]
    instance_count        = 2
    environment_variables = { MODEL_VERSION = "v1" }
  }

  green = var.green_code == null ? null : {
    code_path             = "${path.module}/${var.green_code}"
    command               = ["python3", "score.py"]
    environment_variables = { MODEL_VERSION = var.green_version }
  }
  green_traffic = var.green_traffic
}

output "scoring_uri" {
  value = module.churn.scoring_uri
}
