package kubernetes

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Settings of an attached Kubernetes cluster that an AccessError blames.
const (
	SettingKubeconfig = "kubeconfig"
	SettingContext    = "context"
	SettingNamespace  = "namespace"
)

// AccessError says why a cluster cannot be used for job pods and which setting to fix.
type AccessError struct {
	// Setting is SettingKubeconfig, SettingContext or SettingNamespace.
	Setting string
	Msg     string
	Err     error
}

func (e *AccessError) Error() string {
	if e.Err == nil {
		return e.Msg
	}
	return e.Msg + ": " + e.Err.Error()
}

func (e *AccessError) Unwrap() error { return e.Err }

// Permission is one verb on one pod resource the engine needs in the namespace.
type Permission struct {
	Verb        string
	Subresource string
}

func (p Permission) String() string {
	if p.Subresource != "" {
		return p.Verb + " pods/" + p.Subresource
	}
	return p.Verb + " pods"
}

// NeededPermissions are what the engine does with job pods: create, watch, exec into and
// delete them.
var NeededPermissions = []Permission{
	{Verb: "create"}, {Verb: "get"}, {Verb: "list"}, {Verb: "watch"}, {Verb: "delete"},
	{Verb: "create", Subresource: "exec"},
}

// CheckAccess checks that the cluster behind cfg can run job pods: its kubeconfig
// resolves, the API answers to its credentials, the namespace exists, and a
// SelfSubjectAccessReview allows every one of NeededPermissions there. The first failure
// is an *AccessError naming what is missing.
func CheckAccess(ctx context.Context, cfg Config) error {
	cs, host, err := checkClient(cfg)
	if err != nil {
		return err
	}
	return checkAccess(ctx, cs, host, cfg.Namespace)
}

// checkTimeout bounds each request of a check: the discovery client takes no context.
const checkTimeout = 15 * time.Second

// checkClient builds a client whose every request ends within checkTimeout.
func checkClient(cfg Config) (kubernetes.Interface, string, error) {
	rc, err := cfg.RESTConfig()
	if err != nil {
		return nil, "", &AccessError{Setting: SettingKubeconfig, Msg: "the kubeconfig cannot be used", Err: err}
	}
	rc.Timeout = checkTimeout
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, "", &AccessError{Setting: SettingKubeconfig, Msg: "the kubeconfig cannot be used", Err: err}
	}
	return cs, rc.Host, nil
}

func checkAccess(ctx context.Context, cs kubernetes.Interface, server, namespace string) error {
	if _, err := cs.Discovery().ServerVersion(); err != nil {
		return apiError(server, err)
	}
	nsErr := namespaceExists(ctx, cs, namespace)
	if nsErr != nil {
		return nsErr
	}
	return checkPermissions(ctx, cs, server, namespace)
}

// checkPermissions asks the cluster, with one SelfSubjectAccessReview per permission,
// whether the credentials have every one of NeededPermissions in the namespace. A denied
// one is an *AccessError naming every verb missing.
func checkPermissions(ctx context.Context, cs kubernetes.Interface, server, namespace string) error {
	var denied []string
	for _, p := range NeededPermissions {
		allowed, err := mayDo(ctx, cs, server, namespace, p)
		if err != nil {
			return err
		}
		if !allowed {
			denied = append(denied, p.String())
		}
	}
	if len(denied) > 0 {
		return &AccessError{Setting: SettingKubeconfig, Msg: fmt.Sprintf(
			"the kubeconfig's credentials may not %s in namespace %q; the engine needs create, get, list, watch and delete on pods and create on pods/exec there: bind a Role with those rules to this user or service account",
			strings.Join(denied, ", "), namespace)}
	}
	return nil
}

// ephemeralContainers is what running a task in an image on the engine's own pods needs
// (container.go), beyond NeededPermissions.
var ephemeralContainers = Permission{Verb: "update", Subresource: "ephemeralcontainers"}

// mayDo asks the cluster, with a SelfSubjectAccessReview, whether the credentials have
// permission p in the namespace.
func mayDo(ctx context.Context, cs kubernetes.Interface, server, namespace string, p Permission) (bool, error) {
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: namespace, Verb: p.Verb, Resource: "pods", Subresource: p.Subresource,
		},
	}}
	out, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
	if err != nil {
		return false, &AccessError{Setting: SettingKubeconfig, Msg: fmt.Sprintf("cannot ask the cluster at %s what these credentials may do (SelfSubjectAccessReview)", server), Err: err}
	}
	return out.Status.Allowed, nil
}

// namespaceExists reads the namespace. Credentials limited to the namespace may not read
// namespaces; for them a dry-run pod create tells whether it exists.
func namespaceExists(ctx context.Context, cs kubernetes.Interface, namespace string) error {
	_, err := cs.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		return missingNamespace(namespace)
	case !apierrors.IsForbidden(err):
		return &AccessError{Setting: SettingNamespace, Msg: fmt.Sprintf("cannot read namespace %q", namespace), Err: err}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "mlcompute-check-", Namespace: namespace},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: new(bool),
			Containers:                   []corev1.Container{{Name: "check", Image: "check", Command: []string{"/bin/sh"}}},
		},
	}
	_, err = cs.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	switch {
	case err == nil, apierrors.IsForbidden(err):
		// A forbidden create is reported by the access review with the verbs it lacks.
		return nil
	case apierrors.IsNotFound(err):
		return missingNamespace(namespace)
	}
	return &AccessError{Setting: SettingNamespace, Msg: fmt.Sprintf("cannot create a pod in namespace %q (dry run)", namespace), Err: err}
}

func missingNamespace(namespace string) error {
	return &AccessError{Setting: SettingNamespace, Msg: fmt.Sprintf("namespace %q does not exist in the cluster; create it (kubectl create namespace %s) or set kubernetes.namespace to one that exists", namespace, namespace)}
}

// apiError explains why the API server did not answer: nothing there, a certificate it
// does not trust, or credentials it refuses.
func apiError(server string, err error) error {
	var (
		dnsErr  *net.DNSError
		opErr   *net.OpError
		unknown x509.UnknownAuthorityError
		invalid x509.CertificateInvalidError
		host    x509.HostnameError
		urlErr  *url.Error
	)
	switch {
	case apierrors.IsUnauthorized(err):
		return &AccessError{Setting: SettingKubeconfig, Msg: fmt.Sprintf("the Kubernetes API at %s refused the kubeconfig's credentials (401 Unauthorized): the token or client certificate is wrong or expired", server)}
	case apierrors.IsForbidden(err):
		return &AccessError{Setting: SettingKubeconfig, Msg: fmt.Sprintf("the Kubernetes API at %s forbids these credentials to read its version", server), Err: err}
	case errors.As(err, &unknown), errors.As(err, &invalid), errors.As(err, &host):
		return &AccessError{Setting: SettingKubeconfig, Msg: fmt.Sprintf("the Kubernetes API at %s presented a certificate the kubeconfig's certificate-authority-data does not verify", server), Err: err}
	case errors.As(err, &dnsErr), errors.As(err, &opErr), errors.Is(err, context.DeadlineExceeded):
		return &AccessError{Setting: SettingKubeconfig, Msg: fmt.Sprintf("no Kubernetes API answers at %s (the kubeconfig's server)", server), Err: err}
	case errors.As(err, &urlErr):
		return &AccessError{Setting: SettingKubeconfig, Msg: fmt.Sprintf("no Kubernetes API answers at %s (the kubeconfig's server)", server), Err: err}
	}
	return &AccessError{Setting: SettingKubeconfig, Msg: fmt.Sprintf("the Kubernetes API at %s did not answer as expected", server), Err: err}
}
