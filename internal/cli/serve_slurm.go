package cli

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/slurm"
)

// slurmSSHKeyEnv names the private key --slurm-login connects with (else ~/.ssh/id_ed25519,
// then id_rsa); serve reads it and hands the driver the path.
const slurmSSHKeyEnv = "MLCOMPUTE_SLURM_SSH_KEY"

// slurmFlags are serve's --slurm-* flags, which configure --nodes slurm.
type slurmFlags struct {
	resources                                 string
	partition, account, qos, time, constraint string
	login, workdir                            string
	startTimeout                              time.Duration
}

func (f *slurmFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.partition, "slurm-partition", "", "Slurm partition of the nodes' jobs, with --nodes slurm (default: the cluster's default partition)")
	fl.StringVar(&f.account, "slurm-account", "", "Slurm account the nodes' jobs are charged to (default: the user's default account)")
	fl.StringVar(&f.qos, "slurm-qos", "", "Slurm QOS of the nodes' jobs (default: the account's default)")
	fl.StringVar(&f.time, "slurm-time", "", "time limit of a node's job, in sbatch's --time format (default: the partition's)")
	fl.StringVar(&f.constraint, "slurm-constraint", "", "node features a node's job requires, in sbatch's --constraint format")
	fl.StringVar(&f.login, "slurm-login", "", "run Slurm's commands on this login node over SSH (user@host[:port]); default: on this machine")
	fl.StringVar(&f.workdir, "slurm-workdir", "", "a directory the login and every node share, for the tasks' files (default: the submitting user's home)")
	fl.StringVar(&f.resources, "slurm-resources", slurm.ResourcesSize, "what of a node's size its job asks for: size (--gres=gpu:N, --cpus-per-task and --mem from the size) or gpus (--gres=gpu:N only, CPUs and memory as the partition gives them, for clusters whose nodes are smaller than the sizes); an isolated size always gets --exclusive")
	fl.DurationVar(&f.startTimeout, "slurm-start-timeout", slurm.DefaultStartTimeout, "cancel a node's job that is not running this long after its submission; the node becomes unusable")
}

// config returns the slurm driver's configuration; the flags are refused without
// --nodes slurm, where they would do nothing.
func (f *slurmFlags) config(enabled bool) (slurm.Config, error) {
	if f.resources == "" {
		f.resources = slurm.ResourcesSize
	}
	cfg := slurm.Config{
		Partition: f.partition, Account: f.account, QOS: f.qos, Time: f.time, Constraint: f.constraint,
		Login: f.login, LoginKeyFile: os.Getenv(slurmSSHKeyEnv), Workdir: f.workdir, StartTimeout: f.startTimeout, Resources: f.resources,
	}
	if f.resources != slurm.ResourcesSize && f.resources != slurm.ResourcesGPUs {
		return cfg, fmt.Errorf("--slurm-resources %q is not supported; use %s or %s", f.resources, slurm.ResourcesSize, slurm.ResourcesGPUs)
	}
	if f.startTimeout <= 0 {
		return cfg, fmt.Errorf("--slurm-start-timeout must be positive, got %s", f.startTimeout)
	}
	set := f.partition != "" || f.account != "" || f.qos != "" || f.time != "" || f.constraint != "" ||
		f.login != "" || f.workdir != "" || f.startTimeout != slurm.DefaultStartTimeout || f.resources != slurm.ResourcesSize
	if set && !enabled {
		return cfg, fmt.Errorf("the --slurm-* flags configure --nodes slurm; add --nodes slurm or remove them")
	}
	return cfg, nil
}
