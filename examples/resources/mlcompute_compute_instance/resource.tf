resource "mlcompute_workspace" "example" {
  name = "team-a"
}

# A personal instance that costs nothing while nobody uses it: the engine stops it after
# 30 minutes without activity, and on weekday evenings in case it was left busy.
# Start it again with 'mlcompute compute start --workspace team-a alice'; a later
# terraform apply never starts or stops it.
resource "mlcompute_compute_instance" "alice" {
  name         = "alice"
  workspace_id = mlcompute_workspace.example.id
  vm_size      = "Standard_DS3_v2"
  description  = "Alice's notebooks."

  idle_time_before_shutdown = "PT30M"

  schedules = [
    { action = "Start", cron = "0 8 * * 1-5", time_zone = "Europe/Berlin" },
    { action = "Stop", cron = "0 19 * * 1-5", time_zone = "Europe/Berlin" },
  ]

  setup_scripts = {
    # Once, when the instance is created.
    creation_script = {
      inline  = <<-EOT
        python3 -m venv ~/venv
        ~/venv/bin/pip install --quiet numpy pandas scikit-learn
      EOT
      timeout = "PT15M"
    }
    # Every time the instance starts.
    startup_script = {
      inline = "git -C ~/project pull --ff-only || true"
    }
  }

  tags = {
    owner = "alice"
  }

  # Create waits until the setup scripts have run.
  timeouts = {
    create = "45m"
  }
}
