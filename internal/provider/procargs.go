package provider

import (
	"encoding/binary"
	"errors"
	"strings"
)

// parseProcArgs2 reads the argument vector out of macOS's kern.procargs2 buffer: the
// argument count (a 32-bit integer in the machine's order, little-endian on every Mac
// the provider builds for), the executable's path, NUL padding, then the arguments, each
// ended by a NUL, followed by the environment, which is not read. It is a pure function
// so that Linux tests hold it.
func parseProcArgs2(raw []byte) ([]string, error) {
	if len(raw) < 4 {
		return nil, errors.New("kern.procargs2: too short")
	}
	argc := int(binary.LittleEndian.Uint32(raw))
	rest := raw[4:]
	end := strings.IndexByte(string(rest), 0) // the executable's path
	if end < 0 {
		return nil, errors.New("kern.procargs2: no executable path")
	}
	rest = rest[end:]
	for len(rest) > 0 && rest[0] == 0 {
		rest = rest[1:]
	}
	args := make([]string, 0, argc)
	for len(args) < argc {
		end := strings.IndexByte(string(rest), 0)
		if end < 0 {
			return nil, errors.New("kern.procargs2: the arguments end early")
		}
		args = append(args, string(rest[:end]))
		rest = rest[end+1:]
	}
	return args, nil
}
