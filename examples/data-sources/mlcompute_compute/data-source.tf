resource "mlcompute_workspace" "lab" {
  name = "lab"
}

resource "mlcompute_compute_cluster" "cpu" {
  name         = "cpu-cluster"
  workspace_id = mlcompute_workspace.lab.id
  vm_size      = "Standard_DS3_v2"
  scale_settings = {
    min_node_count = 0
    max_node_count = 4
  }
}

# The cluster's nodes as the engine holds them now, read again on every plan.
data "mlcompute_compute" "cpu" {
  workspace_id = mlcompute_compute_cluster.cpu.workspace_id
  name         = mlcompute_compute_cluster.cpu.name
}

output "cpu_nodes" {
  value = {
    running  = data.mlcompute_compute.cpu.node_state_counts.running
    idle     = data.mlcompute_compute.cpu.node_state_counts.idle
    target   = data.mlcompute_compute.cpu.target_node_count
    resizing = data.mlcompute_compute.cpu.allocation_state == "Resizing"
  }
}
