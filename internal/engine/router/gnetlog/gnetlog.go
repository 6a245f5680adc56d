// Package gnetlog writes the log of github.com/panjf2000/gnet/v2 to an hclog logger, so
// its lines carry the logger's name and level like every other line of the process.
// gnet's info lines (loops starting and stopping) go out at debug level.
package gnetlog

import (
	"fmt"

	"github.com/hashicorp/go-hclog"
	"github.com/panjf2000/gnet/v2/pkg/logging"
)

// New returns a gnet logger writing to l.
func New(l hclog.Logger) logging.Logger { return logger{l} }

type logger struct{ l hclog.Logger }

func (g logger) Debugf(format string, args ...any) { g.l.Debug(fmt.Sprintf(format, args...)) }
func (g logger) Infof(format string, args ...any)  { g.l.Debug(fmt.Sprintf(format, args...)) }
func (g logger) Warnf(format string, args ...any)  { g.l.Warn(fmt.Sprintf(format, args...)) }
func (g logger) Errorf(format string, args ...any) { g.l.Error(fmt.Sprintf(format, args...)) }

// Fatalf is an error: the process decides whether to end, not a library's log line.
func (g logger) Fatalf(format string, args ...any) { g.l.Error(fmt.Sprintf(format, args...)) }
