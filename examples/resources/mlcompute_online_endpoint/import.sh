# An online endpoint is imported by its ID, /workspaces/{workspace}/onlineEndpoints/{name}.
terraform import mlcompute_online_endpoint.churn /workspaces/serving/onlineEndpoints/churn
