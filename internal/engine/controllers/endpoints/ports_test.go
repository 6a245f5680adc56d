package endpoints_test

import (
	"errors"
	"slices"
	"strconv"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/endpoints/endpointstest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/fake"
)

// DESIGN 4: an instance's PORT comes from its node. The node's driver is asked once the
// node is ready, just before the process starts; the port is committed first, so a start
// that failed and an engine that restarted keep it, and the driver is not asked again.
func TestEndpointInstancePortComesFromItsNode(t *testing.T) {
	env := endpointstest.New(t, endpointstest.Options{Fake: fake.Options{CreatePending: true}})
	env.Workspace("wsp", nil)
	env.CreateBlue("wsp", "scorer")
	env.Settle()
	in := env.Instances("wsp", "scorer")[0]
	if in.Port != 0 || len(env.Driver.CallsTo(fake.MethodTaskPort)) != 0 {
		t.Fatalf("port %d, TaskPort calls %v while the node is not ready; want none yet", in.Port, env.Driver.CallsTo(fake.MethodTaskPort))
	}

	// The first start fails after the port was given: the port is stored all the same.
	env.Driver.FailNext(fake.MethodStartTask, driver.Transient(errors.New("connection reset")))
	env.Driver.MakeReady(in.ID)
	env.Settle()
	in = env.Instances("wsp", "scorer")[0]
	if in.State != api.EndpointInstanceFailed || in.Port != fake.FirstTaskPort {
		t.Fatalf("after a failed start: state %s, port %d; want Failed on the driver's port %d", in.State, in.Port, fake.FirstTaskPort)
	}
	calls := env.Driver.Calls()
	asked := slices.Index(calls, fake.Call{Method: fake.MethodTaskPort, Key: in.ID})
	started := slices.IndexFunc(calls, func(c fake.Call) bool { return c.Method == fake.MethodStartTask })
	if asked < 0 || started < asked {
		t.Fatalf("calls %v; want TaskPort of %s before the start", calls, in.ID)
	}

	// The restart, and an engine restart, keep the port: one ask in all.
	env.StepUntil("restarted", func() bool { return !env.Instances("wsp", "scorer")[0].StartedAt.IsZero() })
	started1 := env.Started("wsp", "scorer", "blue", 1, 1)[0]
	task, ok := env.Driver.Task(started1.ID, started1.Task)
	if started1.Restarts != 1 || started1.Port != fake.FirstTaskPort || !ok || task.Spec.Env["PORT"] != strconv.Itoa(fake.FirstTaskPort) {
		t.Fatalf("restarted instance %+v, task %+v; want restart 1 with PORT=%d", started1, task.Spec, fake.FirstTaskPort)
	}
	env.Restart()
	env.Settle()
	if in := env.Instances("wsp", "scorer")[0]; in.Port != fake.FirstTaskPort || in.StartedAt.IsZero() {
		t.Fatalf("after an engine restart: %+v; want the instance adopted on port %d", in, fake.FirstTaskPort)
	}
	if asks := env.Driver.CallsTo(fake.MethodTaskPort); len(asks) != 1 {
		t.Fatalf("TaskPort calls %v; want one", asks)
	}
}

// A node that cannot give a port fails the instance's start, which is retried: no process
// starts without its port.
func TestEndpointInstancePortFailureFailsTheStart(t *testing.T) {
	env := setup(t)
	env.Driver.FailNext(fake.MethodTaskPort, driver.Transient(errors.New("no route to host")))
	env.CreateBlue("wsp", "scorer")
	env.Settle()
	in := env.Instances("wsp", "scorer")[0]
	if in.State != api.EndpointInstanceFailed || in.Port != 0 || len(env.Driver.CallsTo(fake.MethodStartTask)) != 0 {
		t.Fatalf("instance %+v, starts %v; want Failed with no port and no process", in, env.Driver.CallsTo(fake.MethodStartTask))
	}
	env.StepUntil("restarted", func() bool { return !env.Instances("wsp", "scorer")[0].StartedAt.IsZero() })
	again := env.Started("wsp", "scorer", "blue", 1, 1)[0]
	if again.Port != fake.FirstTaskPort {
		t.Fatalf("restarted on port %d; want the driver's answer %d", again.Port, fake.FirstTaskPort)
	}
}
