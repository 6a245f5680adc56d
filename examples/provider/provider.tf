terraform {
  required_providers {
    mlcompute = {
      source = "mlcompute/mlcompute"
    }
  }
}

# The embedded engine: nothing to configure. On first use the provider starts the engine
# from its own binary; it keeps its state in $XDG_DATA_HOME/mlcompute (or MLCOMPUTE_HOME).
provider "mlcompute" {}

# A team engine started with 'mlcompute serve --listen tcp://0.0.0.0:8443 --token-file F'.
# A TCP endpoint that is not loopback needs the token (here from MLCOMPUTE_TOKEN when the
# variable is left null).
variable "mlcompute_token" {
  description = "The team engine's API token."
  type        = string
  sensitive   = true
  default     = null
}

provider "mlcompute" {
  alias    = "team"
  endpoint = "https://mlcompute.example.com:8443"
  token    = var.mlcompute_token
}
