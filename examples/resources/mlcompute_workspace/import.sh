# A workspace is imported by its ID, /workspaces/{name}.
terraform import mlcompute_workspace.example /workspaces/team-a
