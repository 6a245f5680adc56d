# GPU sizes that can serve an online endpoint.
data "mlcompute_vm_sizes" "gpu_endpoints" {
  compute_type = "OnlineDeployment"
  min_gpus     = 1
}

# Sizes of one family with at least 8 vCPUs and 32 GiB of memory, for a compute cluster.
data "mlcompute_vm_sizes" "cpu_cluster" {
  compute_type  = "ComputeCluster"
  family        = "standardDSv2Family"
  min_vcpus     = 8
  min_memory_gb = 32
}

# Retired sizes are listed only on request; they have retired_on set.
data "mlcompute_vm_sizes" "retired_nc" {
  family          = "standardNCFamily"
  include_retired = true
}

output "gpu_endpoint_sizes" {
  value = [for s in data.mlcompute_vm_sizes.gpu_endpoints.sizes : s.name]
}

output "cpu_cluster_sizes" {
  value = { for s in data.mlcompute_vm_sizes.cpu_cluster.sizes : s.name => "${s.vcpus} vCPUs, ${s.memory_gb} GiB" }
}

output "nc_retirement" {
  value = { for s in data.mlcompute_vm_sizes.retired_nc.sizes : s.name => s.retired_on }
}
