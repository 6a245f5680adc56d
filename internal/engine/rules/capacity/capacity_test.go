package capacity

import (
	"reflect"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func waiting(id string, vcpus int64, dedicated bool, age time.Duration) Node {
	return Node{ID: id, VCPUs: vcpus, Dedicated: dedicated, Waiting: true, CreatedOn: t0.Add(-age)}
}

func running(id string, vcpus int64, lowPriority, idle bool, age time.Duration) Node {
	return Node{ID: id, VCPUs: vcpus, Dedicated: !lowPriority, Admitted: true, Preemptible: lowPriority, Idle: idle, CreatedOn: t0.Add(-age)}
}

func TestAdmit(t *testing.T) {
	for _, tc := range []struct {
		name           string
		capacity       int64
		nodes          []Node
		admit, preempt []string
	}{
		{"unlimited admits everything waiting", 0,
			[]Node{waiting("a", 4, true, 0), waiting("b", 400, false, 0)}, []string{"a", "b"}, nil},
		{"what fits is admitted, the rest waits", 8,
			[]Node{running("r", 4, false, false, time.Hour), waiting("a", 4, true, 2*time.Minute), waiting("b", 4, true, time.Minute)},
			[]string{"a"}, nil},
		{"Dedicated first, then oldest", 8,
			[]Node{waiting("low-old", 4, false, time.Hour), waiting("ded-new", 4, true, time.Minute), waiting("ded-old", 4, true, time.Hour)},
			[]string{"ded-old", "ded-new"}, nil},
		{"a Dedicated node preempts LowPriority ones, idle first then newest", 12,
			[]Node{running("busy", 4, true, false, time.Hour), running("idle-old", 4, true, true, 2*time.Hour), running("idle-new", 4, true, true, time.Hour), waiting("d", 4, true, 0)},
			nil, []string{"idle-new"}},
		{"a LowPriority node never preempts", 4,
			[]Node{running("low", 4, true, true, time.Hour), waiting("l", 4, false, 0)}, nil, nil},
		{"never preempts when even all LowPriority nodes would not make room", 8,
			[]Node{running("ded", 4, false, false, time.Hour), running("low", 4, true, true, time.Hour), waiting("big", 8, true, 0)},
			nil, nil},
		{"capacity being freed is promised, not preempted for twice", 8,
			[]Node{{ID: "going", VCPUs: 4, Admitted: true, Terminating: true}, running("low", 4, true, true, time.Hour), waiting("d1", 4, true, time.Minute), waiting("d2", 4, true, 0)},
			nil, []string{"low"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Admit(Limits{VCPUs: tc.capacity}, tc.nodes)
			if !slices.Equal(d.Admit, tc.admit) || !slices.Equal(d.Preempt, tc.preempt) {
				t.Fatalf("Admit = admit %v preempt %v; want admit %v preempt %v", d.Admit, d.Preempt, tc.admit, tc.preempt)
			}
		})
	}
}

// gpuNode is a local node of a size with gpus GPUs; held are the devices of an admitted one.
func gpuNode(id string, gpus int64, admitted bool, age time.Duration, held ...string) Node {
	return Node{ID: id, VCPUs: 6 * gpus, Dedicated: true, Admitted: admitted, Waiting: !admitted, CreatedOn: t0.Add(-age),
		Size: "Standard_NC" + string(rune('0'+gpus)), Local: true, GPUs: gpus, Devices: held}
}

func TestAdmitGPUs(t *testing.T) {
	four := []string{"0", "1", "2", "3"}
	for _, tc := range []struct {
		name    string
		limits  Limits
		nodes   []Node
		admit   []string
		devices map[string][]string
		waits   map[string]string
	}{
		{"two 2-GPU nodes get disjoint GPUs, a third waits naming its size and the count",
			Limits{GPUs: four},
			[]Node{gpuNode("a", 2, false, 3*time.Minute), gpuNode("b", 2, false, 2*time.Minute), gpuNode("c", 2, false, time.Minute)},
			[]string{"a", "b"}, map[string][]string{"a": {"0", "1"}, "b": {"2", "3"}},
			map[string]string{"c": "size Standard_NC2 needs 2 GPUs and 0 of this machine's 4 are free"}},
		{"GPUs held by admitted nodes, terminating ones too, are not handed out",
			Limits{GPUs: four},
			[]Node{gpuNode("a", 1, true, time.Hour, "0"), {ID: "going", Admitted: true, Terminating: true, Local: true, GPUs: 2, Devices: []string{"1", "2"}}, gpuNode("w", 1, false, 0)},
			[]string{"w"}, map[string][]string{"w": {"3"}}, map[string]string{}},
		{"a released node's GPUs go to the waiting node",
			Limits{GPUs: four},
			[]Node{gpuNode("a", 2, true, time.Hour, "0", "1"), gpuNode("c", 2, false, time.Minute)},
			[]string{"c"}, map[string][]string{"c": {"2", "3"}}, map[string]string{}},
		{"a size with more GPUs than the machine has never fits",
			Limits{GPUs: []string{"0", "1"}},
			[]Node{gpuNode("big", 4, false, 0)},
			nil, map[string][]string{}, map[string]string{"big": "size Standard_NC4 needs 4 GPUs and this machine has only 2"}},
		{"no GPUs in the limits: GPU sizes run without devices",
			Limits{},
			[]Node{gpuNode("a", 4, false, 0)},
			[]string{"a"}, map[string][]string{}, map[string]string{}},
		{"nodes that are not local never get the machine's GPUs",
			Limits{GPUs: four},
			[]Node{{ID: "remote", Waiting: true, GPUs: 8, Size: "Standard_ND8"}},
			[]string{"remote"}, map[string][]string{}, map[string]string{}},
		{"CPU sizes beside GPU nodes get no devices",
			Limits{GPUs: []string{"0"}},
			[]Node{gpuNode("g", 1, true, time.Hour, "0"), {ID: "cpu", Waiting: true, Local: true, VCPUs: 4, Size: "Standard_D4"}},
			[]string{"cpu"}, map[string][]string{}, map[string]string{}},
		{"a node short of vCPUs says so, naming its size and the count",
			Limits{VCPUs: 8},
			[]Node{running("r", 6, false, false, time.Hour), {ID: "w", VCPUs: 4, Waiting: true, Size: "Standard_D4"}},
			nil, map[string][]string{}, map[string]string{"w": "size Standard_D4 needs 4 vCPUs and 2 of the engine's 8 are free (mlcompute serve --capacity-vcpus)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Admit(tc.limits, tc.nodes)
			if !slices.Equal(d.Admit, tc.admit) || !reflect.DeepEqual(d.Devices, tc.devices) || !reflect.DeepEqual(d.Waits, tc.waits) {
				t.Fatalf("Admit = admit %v devices %v waits %q; want admit %v devices %v waits %q", d.Admit, d.Devices, d.Waits, tc.admit, tc.devices, tc.waits)
			}
		})
	}
}

func TestAdmitIsolated(t *testing.T) {
	iso := func(id string, admitted bool, age time.Duration) Node {
		return Node{ID: id, VCPUs: 64, Dedicated: true, Admitted: admitted, Waiting: !admitted, CreatedOn: t0.Add(-age), Size: "Standard_E64is_v3", Local: true, Isolated: true}
	}
	cpu := func(id string, admitted bool, age time.Duration) Node {
		return Node{ID: id, VCPUs: 4, Dedicated: true, Admitted: admitted, Waiting: !admitted, CreatedOn: t0.Add(-age), Size: "Standard_D4", Local: true}
	}
	for _, tc := range []struct {
		name  string
		nodes []Node
		admit []string
		waits map[string]string
	}{
		{"an isolated node waits while another local node holds the machine",
			[]Node{cpu("c", true, time.Hour), iso("i", false, 0)},
			nil, map[string]string{"i": "size Standard_E64is_v3 is isolated and runs alone on this machine; 1 other node(s) hold it"}},
		{"while an isolated node holds the machine, no other local node is admitted",
			[]Node{iso("i", true, time.Hour), cpu("c", false, 0), {ID: "remote", Waiting: true, VCPUs: 4}},
			[]string{"remote"}, map[string]string{"c": "node i of an isolated size holds this machine alone"}},
		{"the oldest waiting node takes the empty machine, isolated or not",
			[]Node{iso("i", false, time.Hour), cpu("c", false, 0)},
			[]string{"i"}, map[string]string{"c": "node i of an isolated size holds this machine alone"}},
		{"a terminating node still holds the machine",
			[]Node{{ID: "going", Admitted: true, Terminating: true, Local: true}, iso("i", false, 0)},
			nil, map[string]string{"i": "size Standard_E64is_v3 is isolated and runs alone on this machine; 1 other node(s) hold it"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Admit(Limits{}, tc.nodes)
			if !slices.Equal(d.Admit, tc.admit) || !reflect.DeepEqual(d.Waits, tc.waits) {
				t.Fatalf("Admit = admit %v waits %q; want admit %v waits %q", d.Admit, d.Waits, tc.admit, tc.waits)
			}
		})
	}
}
