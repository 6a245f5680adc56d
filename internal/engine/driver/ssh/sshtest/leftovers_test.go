//go:build unix

package sshtest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strings"
	"testing"
)

// holdHostEnv makes the test binary a process that starts a host, prints its record and
// waits to be killed.
const holdHostEnv = "MLCOMPUTE_SSHTEST_HOLD_HOST"

func TestMain(m *testing.M) {
	if os.Getenv(holdHostEnv) == "1" {
		h := Start(&processTB{})
		raw, _ := json.Marshal(h.rec)
		fmt.Println(string(raw))
		select {}
	}
	os.Exit(m.Run())
}

// processTB is the helper process's testing.TB: a failure ends the process, and cleanups
// never run (the process is killed, which is the point).
type processTB struct{ testing.TB }

func (*processTB) Helper()        {}
func (*processTB) Cleanup(func()) {}
func (*processTB) Failed() bool   { return false }
func (*processTB) Logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}
func (*processTB) Fatal(args ...any) { fmt.Fprintln(os.Stderr, args...); os.Exit(2) }
func (*processTB) Fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(2)
}

func TestStartRemovesWhatAKilledTestProcessLeft(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holdHostEnv+"=1")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the helper process printed no host record: %v", err)
	}
	var left hostRecord
	must(t, json.Unmarshal([]byte(line), &left))
	// Test hosts of other packages, started meanwhile, would sweep too: the sweep lock is
	// held until the leftovers are counted.
	unlock, err := lockFile(sweepLockPath())
	must(t, err)
	must(t, cmd.Process.Kill())
	_ = cmd.Wait()

	// Everything the host made outlives the killed process...
	want := 4 // user, directory, sshd, record
	if left.Namespace != "" {
		want += 2 // namespace, link
	}
	present := leftover(t, left)
	unlock()
	if len(present) != want {
		t.Fatalf("after the kill only %v remain; the helper's host did not make everything (record %+v)", present, left)
	}
	// ...until the next Start.
	Start(t)
	if present := leftover(t, left); len(present) != 0 {
		t.Fatalf("the next Start left %v of the killed process's host", present)
	}
}

// leftover lists what of the record's host still exists.
func leftover(t *testing.T, r hostRecord) []string {
	t.Helper()
	var present []string
	if _, err := user.Lookup(r.User); err == nil {
		present = append(present, "user "+r.User)
	}
	if _, err := os.Stat(r.Dir); err == nil {
		present = append(present, "directory "+r.Dir)
	}
	if pids := r.sshds(); len(pids) > 0 {
		present = append(present, fmt.Sprintf("sshd %v", pids))
	}
	if r.Namespace != "" {
		out, err := exec.Command("ip", "netns", "list").Output()
		must(t, err)
		if strings.Contains(string(out), r.Namespace) {
			present = append(present, "namespace "+r.Namespace)
		}
		if exec.Command("ip", "link", "show", r.HostLink).Run() == nil {
			present = append(present, "link "+r.HostLink)
		}
	}
	if _, err := os.Stat(r.path()); err == nil {
		present = append(present, "record "+r.path())
	}
	return present
}
