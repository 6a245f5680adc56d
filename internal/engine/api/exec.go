package api

import (
	"encoding/binary"
	"fmt"
	"io"
)

// An exec session (POST .../computes/{compute}/exec, upgraded to the ExecProtocol) carries
// frames both ways: a type byte, a 4-byte big-endian length, then the payload. The client
// sends FrameStdin and, when its input ends, FrameStdinEOF; the engine sends FrameOutput
// and finally FrameExit (4-byte exit status) or FrameError (a message).
const (
	ExecProtocol  = "mlcompute-exec"
	FrameStdin    = 'i'
	FrameStdinEOF = 'c'
	FrameOutput   = 'o'
	FrameExit     = 'x'
	FrameError    = 'e'
	maxFrame      = 1 << 20
)

// WriteFrame writes one frame.
func WriteFrame(w io.Writer, kind byte, payload []byte) error {
	var hdr [5]byte
	hdr[0] = kind
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(payload)))
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	_, err := w.Write(payload)
	return err
}

// ReadFrame reads one frame.
func ReadFrame(r io.Reader) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > maxFrame {
		return 0, nil, fmt.Errorf("exec frame of %d bytes is too large", n)
	}
	payload := make([]byte, n)
	_, err := io.ReadFull(r, payload)
	return hdr[0], payload, err
}

// FrameWriter writes everything written to it as frames of one kind.
type FrameWriter struct {
	W    io.Writer
	Kind byte
}

func (f FrameWriter) Write(p []byte) (int, error) {
	for off := 0; off < len(p); off += maxFrame {
		end := min(off+maxFrame, len(p))
		if err := WriteFrame(f.W, f.Kind, p[off:end]); err != nil {
			return off, err
		}
	}
	return len(p), nil
}

// ExecExitCode encodes an exit status for FrameExit.
func ExecExitCode(code int) []byte {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(int32(code)))
	return b[:]
}

// DecodeExitCode reads a FrameExit payload.
func DecodeExitCode(p []byte) int {
	if len(p) != 4 {
		return 1
	}
	return int(int32(binary.BigEndian.Uint32(p)))
}
