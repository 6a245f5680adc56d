// Package mux routes node calls to one of several drivers by the node's key, so the engine
// keeps one driver while nodes come from different places: an attached machine's nodes
// (key prefix chosen by the engine) go to the ssh driver, every other node to the driver
// the operator chose (local, slurm or kubernetes).
package mux

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
)

// Route sends the nodes whose key starts with Prefix to Driver.
type Route struct {
	Prefix string
	Driver driver.Driver
}

// Driver is a routing driver.Driver.
type Driver struct {
	ctx    context.Context
	def    driver.Driver
	routes []Route
	events chan driver.Event
	merge  sync.Once
}

var _ driver.OutputWatcher = (*Driver)(nil)

var _ driver.Driver = (*Driver)(nil)

// New routes to routes by prefix (first match) and to def otherwise. From the first call of
// Events on, the events of every driver are merged into it until ctx ends; a caller that
// reads each driver's events itself uses Sources instead and never calls Events.
func New(ctx context.Context, def driver.Driver, routes ...Route) *Driver {
	return &Driver{ctx: ctx, def: def, routes: routes, events: make(chan driver.Event)}
}

// Sources returns every driver's own event channel, the default driver's first.
func (d *Driver) Sources() []<-chan driver.Event {
	var out []<-chan driver.Event
	for _, drv := range d.all() {
		out = append(out, drv.Events())
	}
	return out
}

func (d *Driver) startMerge() {
	ctx := d.ctx
	for _, drv := range d.all() {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case ev := <-drv.Events():
					select {
					case d.events <- ev:
					case <-ctx.Done():
						return
					}
				}
			}
		}()
	}
}

func (d *Driver) all() []driver.Driver {
	out := []driver.Driver{d.def}
	for _, r := range d.routes {
		out = append(out, r.Driver)
	}
	return out
}

func (d *Driver) route(key string) driver.Driver {
	for _, r := range d.routes {
		if strings.HasPrefix(key, r.Prefix) {
			return r.Driver
		}
	}
	return d.def
}

// Name is the default driver's: the one the operator chose.
func (d *Driver) Name() string { return d.def.Name() }

func (d *Driver) Create(ctx context.Context, spec driver.NodeSpec) (driver.NodeInfo, error) {
	return d.route(spec.Key).Create(ctx, spec)
}

func (d *Driver) Describe(ctx context.Context, key string) (driver.NodeInfo, error) {
	return d.route(key).Describe(ctx, key)
}

// List concatenates every driver's nodes.
func (d *Driver) List(ctx context.Context, owner string) ([]driver.NodeInfo, error) {
	var out []driver.NodeInfo
	for _, drv := range d.all() {
		nodes, err := drv.List(ctx, owner)
		if err != nil {
			return nil, err
		}
		out = append(out, nodes...)
	}
	return out, nil
}

func (d *Driver) Terminate(ctx context.Context, key string) error {
	return d.route(key).Terminate(ctx, key)
}

func (d *Driver) StartTask(ctx context.Context, nodeKey string, spec driver.TaskSpec) error {
	return d.route(nodeKey).StartTask(ctx, nodeKey, spec)
}

func (d *Driver) TaskStatus(ctx context.Context, nodeKey, taskKey string) (driver.TaskStatus, error) {
	return d.route(nodeKey).TaskStatus(ctx, nodeKey, taskKey)
}

func (d *Driver) TaskOutput(ctx context.Context, nodeKey, taskKey string, offset int64) ([]byte, error) {
	return d.route(nodeKey).TaskOutput(ctx, nodeKey, taskKey, offset)
}

// WatchOutput forwards to the node's driver when it watches output (driver.OutputWatcher),
// else it is ErrPermanent: the caller reads again on its own.
func (d *Driver) WatchOutput(ctx context.Context, nodeKey, taskKey string) (<-chan struct{}, error) {
	w, ok := d.route(nodeKey).(driver.OutputWatcher)
	if !ok {
		return nil, driver.Permanent(errors.New("this node's driver does not watch task output"))
	}
	return w.WatchOutput(ctx, nodeKey, taskKey)
}

func (d *Driver) Exec(ctx context.Context, nodeKey string, spec driver.ExecSpec) (int, error) {
	return d.route(nodeKey).Exec(ctx, nodeKey, spec)
}

func (d *Driver) KillTask(ctx context.Context, nodeKey, taskKey string) error {
	return d.route(nodeKey).KillTask(ctx, nodeKey, taskKey)
}

func (d *Driver) FetchOutput(ctx context.Context, nodeKey, taskKey, rel string) (io.ReadCloser, error) {
	return d.route(nodeKey).FetchOutput(ctx, nodeKey, taskKey, rel)
}

// TaskPort asks the node's own driver: a port is the node's business.
func (d *Driver) TaskPort(ctx context.Context, nodeKey string) (int, error) {
	return d.route(nodeKey).TaskPort(ctx, nodeKey)
}

// Events merges every driver's events.
func (d *Driver) Events() <-chan driver.Event {
	d.merge.Do(d.startMerge)
	return d.events
}

// Close closes every driver, the default one included, and returns the first error.
func (d *Driver) Close() error {
	var first error
	for _, drv := range d.all() {
		if err := drv.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
