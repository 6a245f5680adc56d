package drivertest

import (
	"strconv"
	"strings"
)

// Program is what one of the suite's tasks or sessions does: print Output, copy its
// stdin to its output when Stdin is set, then either run until killed (Block) or exit
// with ExitCode. Command renders it as a POSIX sh command line, which drivers that run
// real processes run as they are; Decode reads it back, for drivers such as the fake that
// run none and act it out instead.
type Program struct {
	Output   string
	Stdin    bool
	Block    bool
	ExitCode int
}

// programScript is the sh script of every Program; its parameters follow it on the
// command line, so Decode needs no shell parser. A blocked program execs sleep, so the
// process that a kill reaches is the task's own.
const programScript = `printf '%s' "$1"
case "$3" in *stdin*) cat ;; esac
case "$3" in *block*) exec sleep 1000000 ;; esac
exit "$2"`

// programName is $0 of the script: it marks a suite program.
const programName = "drivertest"

// Command returns the program as a command line: sh -c SCRIPT drivertest OUTPUT CODE MODE.
func (p Program) Command() []string {
	var mode []string
	if p.Stdin {
		mode = append(mode, "stdin")
	}
	if p.Block {
		mode = append(mode, "block")
	}
	return []string{"sh", "-c", programScript, programName, p.Output, strconv.Itoa(p.ExitCode), strings.Join(mode, ",") + ","}
}

// Decode returns the Program a command line from Command stands for; false for any other
// command line.
func Decode(command []string) (Program, bool) {
	if len(command) != 7 || command[0] != "sh" || command[1] != "-c" || command[2] != programScript || command[3] != programName {
		return Program{}, false
	}
	code, err := strconv.Atoi(command[5])
	if err != nil {
		return Program{}, false
	}
	mode := command[6]
	return Program{
		Output:   command[4],
		Stdin:    strings.Contains(mode, "stdin,"),
		Block:    strings.Contains(mode, "block,"),
		ExitCode: code,
	}, true
}
