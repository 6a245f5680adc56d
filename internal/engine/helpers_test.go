package engine

import (
	"testing"
	"time"
)

// sshWait bounds the waits of these tests: they go through real SSH connections, whose
// dials, keep-alives and reconnect back-off (up to 10 s between attempts) take real time.
const sshWait = 60 * time.Second

func (r *rig) eventuallySSH(what string, cond func() bool) {
	r.t.Helper()
	r.eventuallyWithin(sshWait, what, cond)
}

// must fails the test on err.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
