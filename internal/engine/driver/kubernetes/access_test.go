package kubernetes

import (
	"context"
	"errors"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
)

// fakeCluster is a client-go fake that answers access reviews from a set of denied
// permissions.
func accessCluster(denied map[string]bool, objects ...runtime.Object) *fake.Clientset {
	cs := fake.NewClientset(objects...)
	cs.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
		attr := r.Spec.ResourceAttributes
		p := Permission{Verb: attr.Verb, Subresource: attr.Subresource}
		r.Status.Allowed = attr.Resource == "pods" && attr.Namespace == "ml" && !denied[p.String()]
		return true, r, nil
	})
	return cs
}

func accessNamespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func TestCheckAccess(t *testing.T) {
	ctx := context.Background()
	t.Run("Allowed", func(t *testing.T) {
		if err := checkAccess(ctx, accessCluster(nil, accessNamespace("ml")), "https://k8s:6443", "ml"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("MissingNamespace", func(t *testing.T) {
		err := checkAccess(ctx, accessCluster(nil, accessNamespace("other")), "https://k8s:6443", "ml")
		wantAccessError(t, err, SettingNamespace, `namespace "ml" does not exist`)
	})
	t.Run("ForbiddenExec", func(t *testing.T) {
		err := checkAccess(ctx, accessCluster(map[string]bool{"create pods/exec": true, "delete pods": true}, accessNamespace("ml")), "https://k8s:6443", "ml")
		wantAccessError(t, err, SettingKubeconfig, `may not delete pods, create pods/exec in namespace "ml"`)
	})
	t.Run("NamespaceUnreadable", func(t *testing.T) {
		// Credentials bound to one namespace may not read namespaces: a dry-run create
		// decides, and a namespace that is not there is named.
		cs := accessCluster(nil)
		cs.PrependReactor("get", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "ml", errors.New("no"))
		})
		var dryRun bool
		cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
			dryRun = firstOf(a.(k8stesting.CreateActionImpl).GetCreateOptions().DryRun) == metav1.DryRunAll
			return true, nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "ml")
		})
		err := checkAccess(ctx, cs, "https://k8s:6443", "ml")
		wantAccessError(t, err, SettingNamespace, `namespace "ml" does not exist`)
		if !dryRun {
			t.Error("the namespace check created a pod without dry run")
		}
	})
	t.Run("Unauthorized", func(t *testing.T) {
		err := apiError("https://k8s:6443", apierrors.NewUnauthorized("Unauthorized"))
		wantAccessError(t, err, SettingKubeconfig, "refused the kubeconfig's credentials (401 Unauthorized)")
	})
}

func firstOf(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

func wantAccessError(t *testing.T, err error, setting, says string) {
	t.Helper()
	var ae *AccessError
	if !errors.As(err, &ae) {
		t.Fatalf("want an *AccessError, got %T %v", err, err)
	}
	if ae.Setting != setting || !strings.Contains(err.Error(), says) {
		t.Fatalf("got %s: %q, want %s saying %q", ae.Setting, err, setting, says)
	}
}

func TestCheckAccessNoCluster(t *testing.T) {
	// A port nothing listens on: the kubeconfig names a server that is not there.
	cfg := Config{Namespace: "default", Kubeconfig: []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`)}
	err := CheckAccess(context.Background(), cfg)
	wantAccessError(t, err, SettingKubeconfig, "no Kubernetes API answers at https://127.0.0.1:1")
}

func TestCheckAccessBadKubeconfig(t *testing.T) {
	err := CheckAccess(context.Background(), Config{Kubeconfig: []byte("clusters: [")})
	wantAccessError(t, err, SettingKubeconfig, "the kubeconfig cannot be used")
}

// The driver of --nodes kubernetes runs the attached clusters' access review when it
// starts, and refuses to start with every missing verb named, rather than failing at the
// first node.
func TestStartCheckNamesMissingVerbs(t *testing.T) {
	ctx := context.Background()
	rc := &rest.Config{Host: "https://k8s:6443"}
	cfg := Config{Namespace: "ml"}
	if err := check(ctx, accessCluster(nil, accessNamespace("ml")), rc, cfg); err != nil {
		t.Fatalf("all permissions granted: %v", err)
	}
	err := check(ctx, accessCluster(map[string]bool{"create pods": true, "create pods/exec": true}, accessNamespace("ml")), rc, cfg)
	if err == nil {
		t.Fatal("the check passed without create pods and create pods/exec")
	}
	if !strings.Contains(err.Error(), `may not create pods, create pods/exec in namespace "ml"`) {
		t.Errorf("error %q does not name the missing verbs", err)
	}
	if !driver.IsPermanent(err) {
		t.Errorf("error %v is not permanent: a restart cannot grant a permission", err)
	}
}

// The engine's own pods need update on pods/ephemeralcontainers for tasks in images only:
// the check names the permission when it is denied and passes when it is granted.
func TestCheckTasksInImages(t *testing.T) {
	ctx := context.Background()
	for _, denied := range []bool{false, true} {
		d := &Driver{cs: accessCluster(map[string]bool{"update pods/ephemeralcontainers": denied}), rest: &rest.Config{Host: "https://k8s:6443"}, cfg: Config{Namespace: "ml"}}
		err := d.CheckTasksInImages(ctx)
		switch {
		case !denied && err != nil:
			t.Errorf("granted: %v", err)
		case denied && (err == nil || !strings.Contains(err.Error(), `may not update pods/ephemeralcontainers in namespace "ml"`)):
			t.Errorf("denied: %v; want an error naming the permission and namespace", err)
		}
	}
}
