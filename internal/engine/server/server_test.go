package server_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/instances"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/server"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store/storetest"
)

func newServer(t *testing.T, opts server.Options) *httptest.Server {
	t.Helper()
	st := storetest.Open(t, t.TempDir())
	eng, err := engine.New(engine.Config{Store: st, Clock: clocktesting.NewFakeClock(time.Unix(0, 0)), Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	opts.Engine = eng
	srv := httptest.NewServer(server.New(opts))
	t.Cleanup(srv.Close)
	return srv
}

func newClient(t *testing.T, url, token string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(url, token, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestWorkspaceLifecycleOverHTTP(t *testing.T) {
	srv := newServer(t, server.Options{})
	c := newClient(t, srv.URL, "")
	ctx := context.Background()

	ws, err := c.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "team-a", Quotas: map[string]int64{"standardNCSv3Family": 24}})
	if err != nil {
		t.Fatal(err)
	}
	if ws.ID != "/workspaces/team-a" || ws.Quotas["standardNCSv3Family"] != 24 {
		t.Fatalf("created %+v", ws)
	}
	if _, err := c.UpdateWorkspace(ctx, "team-a", api.WorkspaceUpdate{Description: "d"}); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetWorkspace(ctx, "team-a")
	if err != nil || got.Description != "d" || got.Quotas != nil {
		t.Fatalf("get after update = %+v, %v", got, err)
	}
	list, err := c.ListWorkspaces(ctx)
	if err != nil || len(list) != 1 {
		t.Fatalf("list = %v, %v", list, err)
	}
	if err := c.DeleteWorkspace(ctx, "team-a", false); err != nil {
		t.Fatal(err)
	}
	_, err = c.GetWorkspace(ctx, "team-a")
	var apiErr *api.Error
	if !api.IsNotFound(err) || !asAPIError(err, &apiErr) || apiErr.Status != http.StatusNotFound {
		t.Fatalf("get after delete = %v; want not_found with HTTP 404", err)
	}
}

func TestErrorsCarryCodeAndField(t *testing.T) {
	srv := newServer(t, server.Options{})
	c := newClient(t, srv.URL, "")
	_, err := c.CreateWorkspace(context.Background(), api.WorkspaceSpec{Name: "x"})
	var apiErr *api.Error
	if !asAPIError(err, &apiErr) || apiErr.Code != api.CodeInvalid || apiErr.Field != "name" || apiErr.Status != http.StatusBadRequest {
		t.Fatalf("error = %#v; want invalid/name/400", err)
	}
	_, err = c.ListSizes(context.Background(), api.SizeFilter{ComputeType: "Toaster"})
	if !api.IsInvalid(err) || api.FieldOf(err) != "compute_type" {
		t.Fatalf("bad compute_type = %v; want invalid on compute_type", err)
	}
}

func TestUnknownRouteIsJSONNotFound(t *testing.T) {
	srv := newServer(t, server.Options{})
	resp, err := http.Get(srv.URL + "/v1/nothing")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

func TestTokenIsRequiredWhenSet(t *testing.T) {
	srv := newServer(t, server.Options{Token: "s3cret"})
	if _, err := newClient(t, srv.URL, "").Status(context.Background()); !api.IsUnauthorized(err) {
		t.Fatalf("no token: %v; want unauthorized", err)
	}
	if _, err := newClient(t, srv.URL, "wrong").Status(context.Background()); !api.IsUnauthorized(err) {
		t.Fatalf("wrong token: %v; want unauthorized", err)
	}
	if _, err := newClient(t, srv.URL, "s3cret").Status(context.Background()); err != nil {
		t.Fatalf("right token: %v", err)
	}
}

func TestSizesFilterOverHTTP(t *testing.T) {
	srv := newServer(t, server.Options{})
	c := newClient(t, srv.URL, "")
	gpu, err := c.ListSizes(context.Background(), api.SizeFilter{MinGPUs: 1})
	if err != nil || len(gpu) == 0 {
		t.Fatalf("gpu sizes = %d, %v", len(gpu), err)
	}
	for _, s := range gpu {
		if s.GPUs < 1 || s.Retired() {
			t.Errorf("%s: gpus %d retired %v in a GPU, current-only list", s.Name, s.GPUs, s.Retired())
		}
	}
	isolated, err := c.ListIsolatedSizes(context.Background())
	if err != nil || len(isolated) < 4 {
		t.Fatalf("isolated = %d, %v", len(isolated), err)
	}
}

// TestCreateRetriedAfterCrashIsNotDuplicated drops the connection after the engine has
// committed a create, as an engine crash right after the commit would. The client retries
// with the same idempotency key and gets the workspace back; nothing is made twice.
func TestCreateRetriedAfterCrashIsNotDuplicated(t *testing.T) {
	st := storetest.Open(t, t.TempDir())
	eng, _ := engine.New(engine.Config{Store: st, Clock: clocktesting.NewFakeClock(time.Unix(0, 0))})
	api0 := server.New(server.Options{Engine: eng})
	var dropped atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && dropped.CompareAndSwap(false, true) {
			api0.ServeHTTP(httptest.NewRecorder(), r) // committed, response lost
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return
		}
		api0.ServeHTTP(w, r)
	}))
	defer srv.Close()

	var reconnects atomic.Int32
	c := newClient(t, srv.URL, "", client.WithReconnect(func(context.Context) error { reconnects.Add(1); return nil }))
	ws, err := c.CreateWorkspace(context.Background(), api.WorkspaceSpec{Name: "team-a"})
	if err != nil {
		t.Fatalf("create through a dropped connection: %v", err)
	}
	if ws.Name != "team-a" || reconnects.Load() != 1 {
		t.Fatalf("ws %+v, reconnects %d; want team-a after one reconnect", ws, reconnects.Load())
	}
	list, _ := eng.ListWorkspaces(context.Background())
	if len(list) != 1 {
		t.Fatalf("%d workspaces after the retry; want 1", len(list))
	}
}

func TestClientOverUnixSocket(t *testing.T) {
	st := storetest.Open(t, t.TempDir())
	eng, _ := engine.New(engine.Config{Store: st, Clock: clocktesting.NewFakeClock(time.Unix(0, 0)), Version: "v-test"})
	sock := filepath.Join(shortTempDir(t), "e.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: server.New(server.Options{Engine: eng})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	st2, err := newClient(t, "unix://"+sock, "").Status(context.Background())
	if err != nil || st2.Version != "v-test" || st2.NodesDriver != "local" {
		t.Fatalf("status over unix socket = %+v, %v", st2, err)
	}
}

func TestClientRejectsBadEndpoints(t *testing.T) {
	for _, ep := range []string{"ftp://x", "unix://", "http://", "::"} {
		if _, err := client.New(ep, ""); err == nil {
			t.Errorf("client.New(%q) succeeded", ep)
		}
	}
}

func asAPIError(err error, target **api.Error) bool {
	e, ok := err.(*api.Error)
	if ok {
		*target = e
	}
	return ok
}

// shortTempDir is a temp dir short enough for a unix socket path (108 bytes at most).
func shortTempDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "mlc-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// TestActivityTokenOnlyReportsActivity: the token an instance's processes get reports
// activity on that instance, and is refused for every other call.
func TestActivityTokenOnlyReportsActivity(t *testing.T) {
	key := []byte("engine key")
	st := storetest.Open(t, t.TempDir())
	eng, err := engine.New(engine.Config{Store: st, Clock: clocktesting.NewFakeClock(time.Unix(0, 0)), Version: "test",
		NodeAPI: instances.NodeAPI{Endpoint: "unix:///engine.sock", Key: key}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(server.New(server.Options{Engine: eng, Token: "s3cret"}))
	t.Cleanup(srv.Close)
	ctx := context.Background()
	admin := newClient(t, srv.URL, "s3cret")
	if _, err := admin.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "lab"}); err != nil {
		t.Fatal(err)
	}
	var created []*api.Compute
	for _, name := range []string{"dev", "dev2"} {
		c, err := admin.CreateCompute(ctx, "lab", api.ComputeSpec{Name: name, Type: api.TypeComputeInstance, VMSize: "Standard_DS3_v2"})
		if err != nil {
			t.Fatal(err)
		}
		created = append(created, c)
	}
	app := newClient(t, srv.URL, instances.ActivityToken(key, "lab", "dev", created[0].CreatedOn))
	if err := app.ReportActivity(ctx, "lab", "dev"); err != nil {
		t.Fatalf("reporting activity with the instance's token: %v", err)
	}
	if err := app.ReportActivity(ctx, "lab", "dev2"); !api.IsUnauthorized(err) {
		t.Fatalf("activity on another instance: %v; want unauthorized", err)
	}
	if _, err := app.Status(ctx); !api.IsUnauthorized(err) {
		t.Fatalf("status with an activity token: %v; want unauthorized", err)
	}
	if _, err := app.GetCompute(ctx, "lab", "dev"); !api.IsUnauthorized(err) {
		t.Fatalf("reading the instance with its activity token: %v; want unauthorized", err)
	}
}

// GET /v1/backup?artifacts=true: an error before the archive's first byte is an API error
// (400 naming the parameter for a bad value, or for an engine that cannot make one); an
// error after it breaks the stream, so a client never takes a cut archive for a whole one.
func TestBackupArchiveErrors(t *testing.T) {
	ctx := context.Background()
	none := newServer(t, server.Options{})
	if _, err := newClient(t, none.URL, "").BackupArchive(ctx, io.Discard); !api.IsInvalid(err) || api.FieldOf(err) != "artifacts" {
		t.Fatalf("an engine without archives: %v; want invalid on artifacts", err)
	}
	resp, err := http.Get(none.URL + "/v1/backup?artifacts=maybe")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("artifacts=maybe: status %d; want 400", resp.StatusCode)
	}
	early := newServer(t, server.Options{BackupArchive: func(context.Context, io.Writer) error {
		return api.Errorf(api.CodeInternal, "", "manifest gone")
	}})
	if _, err := newClient(t, early.URL, "").BackupArchive(ctx, io.Discard); err == nil || !strings.Contains(err.Error(), "manifest gone") {
		t.Fatalf("an error before the first byte: %v; want it reported", err)
	}
	late := newServer(t, server.Options{BackupArchive: func(_ context.Context, w io.Writer) error {
		_, _ = w.Write(make([]byte, 4096))
		return errors.New("blob damaged")
	}})
	if n, err := newClient(t, late.URL, "").BackupArchive(ctx, io.Discard); err == nil {
		t.Fatalf("an error after %d bytes went unnoticed", n)
	}
}
