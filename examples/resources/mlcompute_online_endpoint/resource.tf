resource "mlcompute_workspace" "serving" {
  name = "serving"
}

# The Python environment green runs in: built on each instance's node before its command
# starts (once per content hash and machine), with its python first on PATH.
resource "mlcompute_environment" "scoring" {
  name         = "scoring"
  workspace_id = mlcompute_workspace.serving.id
  python = {
    requirements = ["numpy==2.1.3"]
  }
}

# Two versions of a model behind one scoring URI: blue takes 90% of live traffic, green
# 10%. Each deployment runs its command with PORT set; the command must serve HTTP there
# (POST /score for requests, GET / for the probes).
resource "mlcompute_online_endpoint" "churn" {
  name         = "churn"
  workspace_id = mlcompute_workspace.serving.id

  deployments = {
    blue = {
      instance_type         = "Standard_DS2_v2"
      instance_count        = 2
      code_path             = "${path.module}/scorer"
      command               = ["python3", "score.py"]
      environment_variables = { MODEL_VERSION = "v1" }
    }
    green = {
      instance_type         = "Standard_DS2_v2"
      code_path             = "${path.module}/scorer-v2"
      command               = ["python", "score.py"]
      environment_id        = mlcompute_environment.scoring.id
      environment_variables = { MODEL_VERSION = "v2" }

      request_settings = {
        request_timeout_ms                   = 2000
        max_concurrent_requests_per_instance = 4
      }
      readiness_probe = {
        path          = "/"
        initial_delay = "PT2S"
        period        = "PT5S"
      }
    }
  }

  traffic = {
    blue  = 90
    green = 10
  }
}

output "scoring_uri" {
  value = mlcompute_online_endpoint.churn.scoring_uri
}
