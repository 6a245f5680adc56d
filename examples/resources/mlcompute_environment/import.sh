# An environment is imported by its ID, /workspaces/{workspace}/environments/{name}.
terraform import mlcompute_environment.train /workspaces/team-a/environments/train
