package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/slurm"
)

func TestSlurmFlagsNeedNodesSlurm(t *testing.T) {
	f := slurmFlags{partition: "gpu", startTimeout: slurm.DefaultStartTimeout}
	if _, err := f.config(false); err == nil || !strings.Contains(err.Error(), "--nodes slurm") {
		t.Fatalf("--slurm-partition without --nodes slurm: %v, want an error naming --nodes slurm", err)
	}
	f.startTimeout, f.partition = time.Minute, ""
	if _, err := f.config(false); err == nil {
		t.Fatal("--slurm-start-timeout without --nodes slurm was accepted")
	}
	f.startTimeout = 0
	if _, err := f.config(true); err == nil {
		t.Fatal("--slurm-start-timeout 0 was accepted")
	}
}

func TestSlurmFlagsMakeTheDriverConfig(t *testing.T) {
	t.Setenv(slurmSSHKeyEnv, "/keys/login")
	f := slurmFlags{partition: "p", account: "a", qos: "q", time: "1:00:00", constraint: "c", login: "u@h", workdir: "/w", startTimeout: time.Minute}
	cfg, err := f.config(true)
	if err != nil {
		t.Fatal(err)
	}
	want := slurm.Config{Partition: "p", Account: "a", QOS: "q", Time: "1:00:00", Constraint: "c", Login: "u@h", Workdir: "/w", StartTimeout: time.Minute}
	if cfg.Partition != want.Partition || cfg.Account != want.Account || cfg.QOS != want.QOS || cfg.Time != want.Time ||
		cfg.Constraint != want.Constraint || cfg.Login != want.Login || cfg.Workdir != want.Workdir || cfg.StartTimeout != want.StartTimeout ||
		cfg.LoginKeyFile != "/keys/login" {
		t.Fatalf("config = %+v, want %+v", cfg, want)
	}
}

func TestSlurmResourcesFlag(t *testing.T) {
	f := slurmFlags{startTimeout: time.Minute, resources: "gpus"}
	if cfg, err := f.config(true); err != nil || cfg.Resources != slurm.ResourcesGPUs {
		t.Fatalf("--slurm-resources gpus: %+v, %v", cfg.Resources, err)
	}
	if _, err := f.config(false); err == nil {
		t.Fatal("--slurm-resources gpus was accepted without --nodes slurm")
	}
	f.resources = "all"
	if _, err := f.config(true); err == nil || !strings.Contains(err.Error(), `--slurm-resources "all" is not supported; use size or gpus`) {
		t.Fatalf("--slurm-resources all: %v", err)
	}
}
