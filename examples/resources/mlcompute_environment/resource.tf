resource "mlcompute_workspace" "example" {
  name = "team-a"
}

# System-managed: the engine builds a virtual environment on each node that needs it, once
# per content hash and machine. With find_links alone, pip runs offline.
resource "mlcompute_environment" "train" {
  name         = "train"
  workspace_id = mlcompute_workspace.example.id
  python = {
    requirements = ["numpy==1.26.4", "scikit-learn>=1.4,<2"]
    find_links   = ["/srv/wheels"]
  }
}

# User-managed: your own interpreter; nothing is installed.
resource "mlcompute_environment" "conda" {
  name         = "conda-x"
  workspace_id = mlcompute_workspace.example.id
  user_managed = {
    interpreter_path = "/opt/conda/envs/x/bin/python"
  }
}
