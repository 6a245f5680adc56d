resource "mlcompute_workspace" "example" {
  name = "team-a"
}

resource "mlcompute_compute_cluster" "cpu" {
  name         = "cpu"
  workspace_id = mlcompute_workspace.example.id
  vm_size      = "Standard_DS3_v2"
  scale_settings = {
    min_node_count = 0
    max_node_count = 2
  }
}

# Every weekday at 02:00 Berlin time, the pipeline of pipeline.yaml runs on the cluster.
# Its YAML (and any code or local inputs it names) is snapshotted at apply: an edit of
# pipeline.yaml plans an update in place.
resource "mlcompute_schedule" "nightly" {
  name         = "nightly"
  workspace_id = mlcompute_workspace.example.id
  trigger = {
    type       = "cron"
    expression = "0 2 * * 1-5"
    time_zone  = "Europe/Berlin"
  }
  create_job = file("${path.module}/pipeline.yaml")
  base_path  = path.module
  overlap    = "forbid" # skip a tick while the last run is still active
  catch_up   = "latest" # after downtime, one run for the last missed tick

  depends_on = [mlcompute_compute_cluster.cpu]
}

# Every 6 hours from the start time on, a command job.
resource "mlcompute_schedule" "refresh" {
  name         = "refresh"
  workspace_id = mlcompute_workspace.example.id
  trigger = {
    type       = "recurrence"
    frequency  = "hour"
    interval   = 6
    start_time = "2026-01-01T00:00:00Z"
  }
  create_job = <<-EOT
    command: python -c "print('refresh')"
    compute: cpu
  EOT
}
