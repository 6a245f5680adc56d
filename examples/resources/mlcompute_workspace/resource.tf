resource "mlcompute_workspace" "example" {
  name        = "team-a"
  description = "Experiments of team A."

  tags = {
    team        = "a"
    cost_center = "ml-research"
  }

  # vCPU limits per VM family, spelled as Azure spells them. GPU families require
  # approval, so their default limit is 0 until a quota is set here.
  quotas = {
    standardDSv2Family  = 200
    standardNCSv3Family = 48
  }
}
