# An attached compute is imported by its ID, /workspaces/{workspace}/computes/{name}.
# The engine never returns password or private_key: keep the one in the configuration, and
# the next apply records it in state (an update in place).
terraform import mlcompute_attached_compute.example /workspaces/team-a/computes/gpu-box
