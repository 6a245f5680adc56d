# A compute instance is imported by its ID, /workspaces/{workspace}/computes/{name}.
terraform import mlcompute_compute_instance.example /workspaces/team-a/computes/alice
