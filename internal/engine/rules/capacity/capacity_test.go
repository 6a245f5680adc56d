package capacity

import (
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
			d := Admit(tc.capacity, tc.nodes)
			if !slices.Equal(d.Admit, tc.admit) || !slices.Equal(d.Preempt, tc.preempt) {
				t.Fatalf("Admit = admit %v preempt %v; want admit %v preempt %v", d.Admit, d.Preempt, tc.admit, tc.preempt)
			}
		})
	}
}
