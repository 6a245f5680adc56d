//go:build unix

package drivertest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
)

// Program is what one of the suite's tasks or sessions does: print Output, check its
// working directory (CheckWorkDir), make its files (Copies, Socket), listen on a port
// (Listen), copy its stdin to its output when Stdin is set, then either run until killed
// (Block) or exit with ExitCode. Command renders it as a POSIX sh command line, which drivers that run
// real processes run as they are; Decode reads it back, for drivers such as the fake that
// run none and act it out instead.
type Program struct {
	Output   string
	Stdin    bool
	Block    bool
	ExitCode int
	// CheckWorkDir makes the program exit 3 unless driver.WorkDirEnv holds the absolute
	// path of the directory it started in.
	CheckWorkDir bool
	// Copies run in order as cp -R FROM TO, relative to the working directory (exit 4
	// when one fails): "in/." copies a directory's contents into an existing TO.
	Copies []Copy
	// Socket, when set, is a path where the program leaves a Unix socket (exit 5 when
	// it cannot).
	Socket string
	// Listen, when set, is a TCP port the program listens on, on every address of its
	// node, after its files (exit 6 when it cannot): then it prints ListeningMarker and,
	// with Block, holds the port until killed; without, it closes it and goes on.
	Listen int
}

// ListeningMarker is what a program that listens on its port prints once it does.
const ListeningMarker = "listening\n"

// listenScript binds and listens on port $1 in Python (the suite's nodes have python3, as
// for Socket), prints the marker, and with $2 = hold execs sleep with the socket, so the
// port is held by the task's own process until it is killed.
const listenScript = `import os, socket, sys
s = socket.socket()
try:
    s.bind(("", int(sys.argv[1])))
    s.listen()
except OSError as e:
    print(e)
    sys.exit(6)
sys.stdout.write("listening\n")
sys.stdout.flush()
if sys.argv[2] == "hold":
    os.set_inheritable(s.fileno(), True)
    os.execvp("sleep", ["sleep", "1000000"])`

// Copy is one cp -R of a Program.
type Copy struct{ From, To string }

// programScript is the sh script of every Program; its parameters follow it on the
// command line, so Decode needs no shell parser. A blocked program execs sleep, so the
// process that a kill reaches is the task's own.
const programScript = `printf '%s' "$1"
case "$3" in *workdir*) [ "$MLCOMPUTE_WORK_DIR" = "$(pwd -P)" ] || { echo "MLCOMPUTE_WORK_DIR is '$MLCOMPUTE_WORK_DIR' in $(pwd -P)"; exit 3; } ;; esac
code=$2 mode=$3 sock=$4 port=$5 listen=$6
shift 6
while [ $# -ge 2 ]; do cp -R "$1" "$2" || exit 4; shift 2; done
if [ -n "$sock" ]; then python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$sock" || exit 5; fi
if [ "$port" != 0 ]; then
  case "$mode" in *block*) exec python3 -c "$listen" "$port" hold ;; esac
  python3 -c "$listen" "$port" go || exit 6
fi
set -- "" "$code" "$mode"
case "$3" in *stdin*) cat ;; esac
case "$3" in *block*) exec sleep 1000000 ;; esac
exit "$2"`

// programName is $0 of the script: it marks a suite program.
const programName = "drivertest"

// Command returns the program as a command line:
// sh -c SCRIPT drivertest OUTPUT CODE MODE SOCKET PORT LISTEN-SCRIPT [FROM TO]...
func (p Program) Command() []string {
	var mode []string
	if p.Stdin {
		mode = append(mode, "stdin")
	}
	if p.Block {
		mode = append(mode, "block")
	}
	if p.CheckWorkDir {
		mode = append(mode, "workdir")
	}
	cmd := []string{"sh", "-c", programScript, programName, p.Output, strconv.Itoa(p.ExitCode), strings.Join(mode, ",") + ",", p.Socket, strconv.Itoa(p.Listen), listenScript}
	for _, c := range p.Copies {
		cmd = append(cmd, c.From, c.To)
	}
	return cmd
}

// Decode returns the Program a command line from Command stands for; false for any other
// command line.
func Decode(command []string) (Program, bool) {
	if len(command) < 10 || len(command)%2 != 0 || command[0] != "sh" || command[1] != "-c" || command[2] != programScript || command[3] != programName || command[9] != listenScript {
		return Program{}, false
	}
	code, err := strconv.Atoi(command[5])
	if err != nil {
		return Program{}, false
	}
	port, err := strconv.Atoi(command[8])
	if err != nil {
		return Program{}, false
	}
	mode := command[6]
	p := Program{
		Output:       command[4],
		Stdin:        strings.Contains(mode, "stdin,"),
		Block:        strings.Contains(mode, "block,"),
		CheckWorkDir: strings.Contains(mode, "workdir,"),
		ExitCode:     code,
		Socket:       command[7],
		Listen:       port,
	}
	for i := 10; i+1 < len(command); i += 2 {
		p.Copies = append(p.Copies, Copy{From: command[i], To: command[i+1]})
	}
	return p, true
}

// ActOutFiles does, in the working directory work of this machine, what the program's
// command line does to files, for a driver that runs no processes (the fake): it checks
// that work is absolute (CheckWorkDir), runs the copies as cp -R would, and leaves the
// socket. It returns the exit code the command line would end with at the first failure
// (3, 4 or 5), or 0.
func (p Program) ActOutFiles(work string) int {
	if p.CheckWorkDir && !filepath.IsAbs(work) {
		return 3
	}
	for _, c := range p.Copies {
		if err := actOutCopy(work, c); err != nil {
			return 4
		}
	}
	if p.Socket != "" {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
		if err != nil {
			return 5
		}
		defer unix.Close(fd)
		if err := unix.Bind(fd, &unix.SockaddrUnix{Name: filepath.Join(work, p.Socket)}); err != nil {
			return 5
		}
	}
	return 0
}

// actOutCopy is cp -R FROM TO: "dir/." copies the contents into TO, a directory goes
// into TO when TO exists, a file onto TO or into it.
func actOutCopy(work string, c Copy) error {
	src, dst := filepath.Join(work, c.From), filepath.Join(work, c.To)
	info, err := os.Stat(src)
	if err != nil {
		return err
	}
	if to, err := os.Stat(dst); err == nil && to.IsDir() && (!info.IsDir() || !strings.HasSuffix(c.From, "/.")) {
		dst = filepath.Join(dst, filepath.Base(src))
	}
	return driver.CopyTree(src, dst)
}

// HeldPorts is what a driver that runs no processes (the fake) keeps to act out Listen:
// the ports its nodes' blocked programs hold. Make one per driver (HeldPorts{}); it is
// used by one goroutine at a time (the fake calls its Start under its lock).
type HeldPorts map[string]bool

// ActOutListen acts out the program's Listen on node, after ActOutFiles: exit 6 when a
// blocked program of the node holds the port, else ListeningMarker printed and, with
// Block, the port held from then on (a driver without processes cannot tell when a kill
// frees it, and the suite kills no holder before it asks again).
func (p Program) ActOutListen(held HeldPorts, node string) (output string, code int) {
	if p.Listen == 0 {
		return "", 0
	}
	key := node + ":" + strconv.Itoa(p.Listen)
	if held[key] {
		return "", 6
	}
	if p.Block {
		held[key] = true
	}
	return ListeningMarker, 0
}
