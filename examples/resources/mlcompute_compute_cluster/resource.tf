resource "mlcompute_workspace" "example" {
  name = "team-a"

  # GPU families require approval: their default quota is 0 until one is set here.
  # The GPU cluster below needs max_node_count * vCPUs = 4 * 6 = 24 vCPUs.
  quotas = {
    standardNCSv3Family = 24
  }
}

# A CPU cluster that costs nothing while idle: it scales up as soon as jobs are queued
# for it, and releases each node 2 minutes after its last job ended.
resource "mlcompute_compute_cluster" "cpu" {
  name         = "cpu"
  workspace_id = mlcompute_workspace.example.id
  vm_size      = "Standard_DS3_v2"
  description  = "CPU training and batch scoring."

  scale_settings = {
    min_node_count                       = 0
    max_node_count                       = 4
    scale_down_nodes_after_idle_duration = "PT120S"
  }

  tags = {
    team = "a"
  }
}

# A GPU cluster of low-priority nodes, which give way to dedicated nodes when the
# engine runs out of capacity (their jobs go back to the queue).
resource "mlcompute_compute_cluster" "gpu" {
  name         = "gpu"
  workspace_id = mlcompute_workspace.example.id
  vm_size      = "Standard_NC6s_v3"
  vm_priority  = "LowPriority"

  scale_settings = {
    max_node_count                       = 4
    scale_down_nodes_after_idle_duration = "PT15M"
  }

  # Deleting a cluster waits until every node is released.
  timeouts = {
    delete = "45m"
  }
}
