# A compute cluster is imported by its ID, /workspaces/{workspace}/computes/{name}.
terraform import mlcompute_compute_cluster.example /workspaces/team-a/computes/cpu
