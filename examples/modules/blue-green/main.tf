# Blue/green rollouts of one model behind one online endpoint.
#
# `blue` serves the live traffic. To roll out a new version:
#   1. set `green` to the new version; it starts and must pass its readiness probe, but
#      takes no live traffic yet;
#   2. optionally shadow it: `green_mirror = 10` copies 10% of live requests to it (their
#      answers are discarded), to watch its logs and latency on real requests;
#   3. move traffic: `green_traffic = 10`, then 50, then 100; every step is an in-place
#      change of the router's split, with no restart;
#   4. promote: copy `green` into `blue`, set `green = null` and `green_traffic = 0`. Blue rolls
#      out to the new version (new instances ready before the old ones stop), then green goes.
# Rolling back is step 3 in reverse, at any point.

terraform {
  required_providers {
    mlcompute = {
      source = "mlcompute/mlcompute"
    }
  }
}

variable "workspace_id" {
  description = "ID of the workspace the endpoint belongs to."
  type        = string
}

variable "name" {
  description = "Name of the online endpoint."
  type        = string
}

variable "instance_type" {
  description = "VM size of every instance."
  type        = string
  default     = "Standard_DS2_v2"
}

variable "blue" {
  description = "The live version."
  type = object({
    code_path             = string
    command               = list(string)
    instance_count        = optional(number, 1)
    environment_variables = optional(map(string), {})
  })
}

variable "green" {
  description = "The next version, or null when no rollout is under way."
  type = object({
    code_path             = string
    command               = list(string)
    instance_count        = optional(number, 1)
    environment_variables = optional(map(string), {})
  })
  default = null
}

variable "green_traffic" {
  description = "Percent of live traffic that goes to green (the rest goes to blue)."
  type        = number
  default     = 0

  validation {
    condition     = var.green_traffic >= 0 && var.green_traffic <= 100 && floor(var.green_traffic) == var.green_traffic
    error_message = "green_traffic must be a whole percent from 0 to 100."
  }
}

variable "green_mirror" {
  description = "Percent of live requests copied to green while it has no live traffic (at most 50)."
  type        = number
  default     = 0

  validation {
    condition     = var.green_mirror >= 0 && var.green_mirror <= 50 && floor(var.green_mirror) == var.green_mirror
    error_message = "green_mirror must be a whole percent from 0 to 50."
  }
}

locals {
  versions = merge({ blue = var.blue }, var.green == null ? {} : { green = var.green })
  traffic = var.green == null ? { blue = 100 } : {
    blue  = 100 - var.green_traffic
    green = var.green_traffic
  }
  mirror = var.green != null && var.green_traffic == 0 && var.green_mirror > 0 ? { green = var.green_mirror } : {}
}

resource "mlcompute_online_endpoint" "this" {
  name         = var.name
  workspace_id = var.workspace_id

  deployments = {
    for name, v in local.versions : name => {
      instance_type         = var.instance_type
      instance_count        = v.instance_count
      code_path             = v.code_path
      command               = v.command
      environment_variables = v.environment_variables
      readiness_probe = {
        initial_delay = "PT1S"
        period        = "PT2S"
      }
    }
  }

  traffic        = local.traffic
  mirror_traffic = local.mirror

  lifecycle {
    precondition {
      condition     = var.green != null || (var.green_traffic == 0 && var.green_mirror == 0)
      error_message = "green_traffic and green_mirror need a green version: set var.green first."
    }
    precondition {
      condition     = var.green_mirror == 0 || var.green_traffic == 0
      error_message = "green_mirror copies requests to a version without live traffic: set green_traffic = 0 while mirroring."
    }
  }
}

output "scoring_uri" {
  description = "Where clients POST scoring requests."
  value       = mlcompute_online_endpoint.this.scoring_uri
}

output "primary_key" {
  description = "The endpoint's primary key (Authorization: Bearer <key>)."
  value       = mlcompute_online_endpoint.this.primary_key
  sensitive   = true
}

output "endpoint_id" {
  description = "The endpoint's ID."
  value       = mlcompute_online_endpoint.this.id
}
