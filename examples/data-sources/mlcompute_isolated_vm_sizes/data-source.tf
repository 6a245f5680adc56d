data "mlcompute_isolated_vm_sizes" "all" {}

# Isolated sizes with an RDMA (InfiniBand) network, for distributed training that must
# run on hardware dedicated to one customer.
output "isolated_rdma_sizes" {
  value = [for s in data.mlcompute_isolated_vm_sizes.all.sizes : s.name if s.rdma_capable]
}
