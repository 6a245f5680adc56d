resource "mlcompute_workspace" "example" {
  name = "team-a"
}

variable "gpu_box_private_key" {
  description = "PEM private key for gpu-box, e.g. TF_VAR_gpu_box_private_key=\"$(cat ~/.ssh/mlcompute_ed25519)\"."
  type        = string
  sensitive   = true
}

# A GPU workstation the team already owns. The engine connects on apply, pins the host key
# it sees, checks the machine runs Linux and reads its vCPUs and memory.
resource "mlcompute_attached_compute" "gpu_box" {
  name         = "gpu-box"
  workspace_id = mlcompute_workspace.example.id
  description  = "The lab's A100 workstation."

  virtual_machine = {
    address     = "gpu-box.lab.example.com"
    username    = "ml"
    private_key = var.gpu_box_private_key
  }
}

variable "build_box_password" {
  type      = string
  sensitive = true
}

# A machine reached with a password on another port, its host key pinned up front
# (ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub on the machine prints it).
resource "mlcompute_attached_compute" "build_box" {
  name         = "build-box"
  workspace_id = mlcompute_workspace.example.id

  virtual_machine = {
    address              = "10.20.0.7"
    ssh_port             = 2222
    username             = "builder"
    password             = var.build_box_password
    host_key_fingerprint = "SHA256:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU"
  }
}

output "gpu_box_size" {
  value = "${mlcompute_attached_compute.gpu_box.vcpus} vCPUs, ${mlcompute_attached_compute.gpu_box.memory_gb} GiB"
}

variable "team_a_kubeconfig" {
  description = "The content of a kubeconfig for the team's cluster, e.g. TF_VAR_team_a_kubeconfig=\"$(cat ~/.kube/mlcompute-team-a.yaml)\"."
  type        = string
  sensitive   = true
}

# A Kubernetes cluster the team already runs (AKS, Arc-enabled, on premises). Jobs on it
# run as pods of an instance type, one per rank, deleted when the job ends:
#   mlcompute job submit --workspace team-a --compute k8s --instance-type gpu --instance-count 2 -- python train.py
resource "mlcompute_attached_compute" "k8s" {
  name         = "k8s"
  workspace_id = mlcompute_workspace.example.id

  kubernetes = {
    kubeconfig = var.team_a_kubeconfig
    namespace  = "team-a"
    image      = "registry.example.com/ml/train:2024.06"

    instance_types = {
      cpu = {
        resources = {
          requests = { cpu = "2", memory = "8Gi" }
          limits   = { cpu = "4", memory = "8Gi" }
        }
      }
      gpu = {
        node_selector = { "nvidia.com/gpu.present" = "true" }
        resources = {
          requests = { cpu = "8", memory = "60Gi" }
          limits   = { cpu = "8", memory = "60Gi", "nvidia.com/gpu" = "1" }
        }
      }
    }
    default_instance_type = "cpu"
  }
}

output "k8s_capacity" {
  value = "${mlcompute_attached_compute.k8s.vcpus} vCPUs, ${mlcompute_attached_compute.k8s.memory_gb} GiB on the nodes its instance types can use"
}
