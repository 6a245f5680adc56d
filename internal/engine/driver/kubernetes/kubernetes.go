package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/keylock"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/remotetask"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/ssh"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/lazyregexp"
)

// deleteGrace is the grace period of a node's pod when it is released: its PID 1 exits at
// once on SIGTERM (see holderScript), so this bounds a pod whose processes do not.
const deleteGrace = 5

// forceAfter is how long Terminate waits for a deleted pod to go before it deletes it
// again with no grace period (a node whose kubelet does not answer).
const forceAfter = 30 * time.Second

// Driver is the kubernetes node driver; see the package doc.
type Driver struct {
	cfg    Config
	log    hclog.Logger
	cs     kubernetes.Interface
	rest   *rest.Config
	ps     podSpec
	events chan driver.Event
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	factory  informers.SharedInformerFactory
	informer cache.SharedIndexInformer
	pods     listersv1.PodNamespaceLister

	keys keylock.Locks

	// imported holds "<node>/<content hash>" of the archives imported into a node's
	// containerd (importOnce): the driver's own (archive.go) and tasks' images
	// (container.go). importing serialises the imports of one key.
	importing keylock.Locks
	importMu  sync.Mutex
	imported  map[string]bool

	mu      sync.Mutex
	nodes   *remotetask.Table[*node]   // watched nodes by key, under mu
	waiters map[string][]chan struct{} // pod name -> closed when the pod is gone
}

// node is a watched pod. Its Seen is the pod's creation when the API says so.
type node struct {
	remotetask.Node
	name string
	uid  types.UID
	// timed says the start timeout is armed.
	timed bool
	// user is the user its container runs as, once asked; settled holds the ephemeral
	// containers (tasks in images) already looked at by watchTaskContainers.
	user    *podUser
	settled map[string]bool
	// waitingSent is the scheduler's message last sent as NodeWaiting. It is kept apart
	// from info.Reason, which Describe also sets from the watch's cache: a Describe that
	// saw the message first must not keep the watch from sending it.
	waitingSent string
}

var _ driver.Driver = (*Driver)(nil)

var idRE = lazyregexp.New(`^[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}$`)

// New connects to the cluster, checks that it answers, that the namespace exists and that
// the engine may do there what it needs with pods (check), and starts the watch of the engine's pods (one shared
// informer, selected by the engine id's label). Close stops the watch, leaving pods and
// tasks running.
func New(ctx context.Context, cfg Config) (*Driver, error) {
	if !idRE.MatchString(cfg.EngineID) {
		return nil, fmt.Errorf("kubernetes driver: invalid engine id %q", cfg.EngineID)
	}
	if cfg.Image == "" {
		return nil, fmt.Errorf("kubernetes driver: no image for the nodes' pods: set --kube-image or %s", ImageEnv)
	}
	if cfg.Namespace == "" {
		cfg.Namespace = DefaultNamespace
	}
	cs, rc, err := cfg.Clientset()
	if err != nil {
		return nil, fmt.Errorf("kubernetes driver: %w", err)
	}
	if err := check(ctx, cs, rc, cfg); err != nil {
		return nil, fmt.Errorf("kubernetes driver: %w", err)
	}
	return start(ctx, cfg, cs, rc)
}

// start starts the watch of a checked configuration's cluster.
func start(ctx context.Context, cfg Config, cs kubernetes.Interface, rc *rest.Config) (*Driver, error) {
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = DefaultStartTimeout
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	routeKlog(cfg.Logger)
	wctx, cancel := context.WithCancel(context.Background())
	d := &Driver{
		cfg: cfg, log: cfg.Logger.Named("kubernetes"), cs: cs, rest: rc,
		ps: podSpec{
			namespace: cfg.Namespace, engineID: cfg.EngineID, image: cfg.Image, nodeSelector: cfg.NodeSelector,
			requestScale: cfg.RequestScale, schedulingGates: cfg.schedulingGates,
		},
		events: make(chan driver.Event, 256), ctx: wctx, cancel: cancel,
		waiters: map[string][]chan struct{}{},
	}
	d.nodes = remotetask.NewTable[*node](&d.mu, wctx, cfg.Clock, &d.wg, d.log)
	d.factory = informers.NewSharedInformerFactoryWithOptions(cs, 0,
		informers.WithNamespace(cfg.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = d.selector() }))
	pi := d.factory.Core().V1().Pods()
	d.informer = pi.Informer()
	d.pods = pi.Lister().Pods(cfg.Namespace)
	if _, err := d.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { d.onPod(obj) },
		UpdateFunc: func(_, obj any) { d.onPod(obj) },
		DeleteFunc: d.onDelete,
	}); err != nil {
		cancel()
		return nil, fmt.Errorf("kubernetes driver: watching pods: %w", err)
	}
	d.factory.Start(wctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), d.informer.HasSynced) {
		cancel()
		d.factory.Shutdown()
		return nil, fmt.Errorf("kubernetes driver: the watch of pods in namespace %s did not start: %w", cfg.Namespace, driver.Transient(ctx.Err()))
	}
	return d, nil
}

// check says, in a message that names what is wrong, whether the cluster answers, the
// namespace exists, the engine may list pods in it, and a SelfSubjectAccessReview allows
// every one of NeededPermissions there (as attached clusters are checked).
func check(ctx context.Context, cs kubernetes.Interface, rc *rest.Config, cfg Config) error {
	if _, err := cs.Discovery().ServerVersion(); err != nil {
		if apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err) {
			return fmt.Errorf("the Kubernetes API at %s refused the kubeconfig's credentials: %w", rc.Host, classify(err))
		}
		return fmt.Errorf("the Kubernetes API at %s does not answer: %w", rc.Host, classify(err))
	}
	_, err := cs.CoreV1().Namespaces().Get(ctx, cfg.Namespace, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return driver.Permanent(fmt.Errorf("namespace %q does not exist in the cluster at %s (--kube-namespace)", cfg.Namespace, rc.Host))
	case err != nil && !apierrors.IsForbidden(err):
		// A Role in the namespace need not grant reading namespaces: the pods' list below
		// says what matters.
		return fmt.Errorf("reading namespace %q: %w", cfg.Namespace, classify(err))
	}
	if _, err := cs.CoreV1().Pods(cfg.Namespace).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		return fmt.Errorf("listing pods in namespace %q: %w", cfg.Namespace, classify(err))
	}
	// The check attached clusters get: a node fails at its first pod or exec otherwise.
	if err := checkPermissions(ctx, cs, rc.Host, cfg.Namespace); err != nil {
		return driver.Permanent(err)
	}
	return nil
}

// CheckTasksInImages says, in an error naming the permission, when the credentials may not
// add ephemeral containers to the engine's pods, which tasks in images on them need
// (container.go). The engine's own pods only ask it, and only warn: a cluster without
// container environments needs no such rule, and such a task fails at its start, naming
// it.
func (d *Driver) CheckTasksInImages(ctx context.Context) error {
	allowed, err := mayDo(ctx, d.cs, d.rest.Host, d.cfg.Namespace, ephemeralContainers)
	if err != nil || allowed {
		return err
	}
	return fmt.Errorf("the kubeconfig's credentials may not %s in namespace %q: jobs and deployments in container environments will fail at their start; add that rule to the engine's Role to run them",
		ephemeralContainers, d.cfg.Namespace)
}

// Name is "kubernetes".
func (d *Driver) Name() string { return "kubernetes" }

// Events delivers NodeReady, NodeGone and TaskExited.
func (d *Driver) Events() <-chan driver.Event { return d.events }

// Close stops the watch and the task watchers; pods and tasks keep running.
func (d *Driver) Close() error {
	d.cancel()
	d.factory.Shutdown()
	d.wg.Wait()
	return nil
}

// selector selects this engine's pods.
func (d *Driver) selector() string { return LabelEngine + "=" + labelValue(d.cfg.EngineID) }

// podName is the pod of a node key.
func (d *Driver) podName(key string) string { return PodName(d.cfg.EngineID, key) }

func (d *Driver) lockKey(key string) func() { return d.keys.Lock(key) }

// ours reports whether a pod is one of this engine's nodes, and its key.
func (d *Driver) ours(pod *corev1.Pod) (string, bool) {
	key := pod.Annotations[AnnotationNode]
	return key, key != "" && pod.Annotations[AnnotationEngine] == d.cfg.EngineID && pod.Name == d.podName(key)
}

// Create makes the node's pod unless it exists: see the package doc.
func (d *Driver) Create(ctx context.Context, spec driver.NodeSpec) (driver.NodeInfo, error) {
	if err := checkKey(spec.Key); err != nil {
		return driver.NodeInfo{}, driver.Permanent(err)
	}
	unlock := d.lockKey(spec.Key)
	defer unlock()
	name := d.podName(spec.Key)
	pod, err := d.pods.Get(name)
	if err != nil {
		pod = nil
	}
	if pod != nil && stateOf(pod).gone {
		// A pod of this key that ended (or is going): it is no node. Make a new one.
		if err := d.deleteAndWait(ctx, name, pod.UID); err != nil {
			return driver.NodeInfo{}, fmt.Errorf("creating node %s: removing its ended pod: %w", spec.Key, err)
		}
		pod = nil
	}
	if pod == nil {
		ps := d.ps
		if d.cfg.Archive != nil {
			hosts, err := d.importedHosts(ctx, spec)
			if err != nil {
				return driver.NodeInfo{}, fmt.Errorf("creating node %s: %w", spec.Key, err)
			}
			ps.hosts = hosts
		}
		want, err := buildPod(ps, spec)
		if err != nil {
			return driver.NodeInfo{}, fmt.Errorf("creating node %s: %w", spec.Key, driver.Permanent(err))
		}
		pod, err = d.cs.CoreV1().Pods(d.cfg.Namespace).Create(ctx, want, metav1.CreateOptions{})
		switch {
		case apierrors.IsAlreadyExists(err):
			if pod, err = d.cs.CoreV1().Pods(d.cfg.Namespace).Get(ctx, name, metav1.GetOptions{}); err != nil {
				return driver.NodeInfo{}, fmt.Errorf("creating node %s: reading its pod: %w", spec.Key, classify(err))
			}
		case err != nil:
			return driver.NodeInfo{}, fmt.Errorf("creating node %s: %w", spec.Key, classify(err))
		default:
			d.log.Debug("pod created", "node", spec.Key, "pod", name)
		}
	}
	info, gone, reason := d.adopt(ctx, pod, false)
	if gone {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			d.emit(driver.Event{Kind: driver.NodeGone, NodeKey: spec.Key, Reason: reason})
		}()
	}
	return info, nil
}

// adopt watches a node's pod (when not already) and returns what it knows of it; gone
// says the pod is no live node (and is not watched). With tasks, the node's running tasks
// are watched too (a node the driver did not create: an engine restart), before adopt
// returns (remotetask.Tasks.Adopt says why).
func (d *Driver) adopt(ctx context.Context, pod *corev1.Pod, tasks bool) (info driver.NodeInfo, gone bool, reason string) {
	key := pod.Annotations[AnnotationNode]
	d.mu.Lock()
	n, ok := d.nodes.Get(key)
	if !ok || n.uid != pod.UID {
		n = &node{name: pod.Name, uid: pod.UID, Node: d.nodes.NewNode(key,
			driver.NodeInfo{Key: key, Owner: pod.Annotations[AnnotationOwner], Address: "pod/" + pod.Name})}
		if c := pod.CreationTimestamp.Time; !c.IsZero() && c.Before(n.Seen) {
			n.Seen = c
		}
		d.nodes.Put(n)
	}
	// The informer's copy is at least as new as any event already handled (handlers run
	// after the cache is updated), so a change that happened before the node was watched
	// is not missed.
	if cached, err := d.pods.Get(pod.Name); err == nil && cached.UID == pod.UID {
		pod = cached
	}
	st := stateOf(pod)
	if st.gone {
		d.nodes.Drop(n)
		d.mu.Unlock()
		return driver.NodeInfo{}, true, st.reason
	}
	d.update(n, pod, st)
	d.watchTaskContainers(n, pod)
	if !n.Info.Ready && !n.timed {
		n.timed = true
		d.startTimer(n)
	}
	info = n.Info
	d.mu.Unlock()
	if tasks && info.Ready {
		d.adoptTasks(ctx, n)
	}
	return info, false, ""
}

// update sets a node's info from its pod's state. Callers hold d.mu.
func (d *Driver) update(n *node, pod *corev1.Pod, st podState) {
	if st.ready {
		n.Info.Ready, n.Info.Reason, n.Info.Address = true, "", pod.Status.PodIP
		if n.Info.StartedAt.IsZero() {
			n.Info.StartedAt = d.cfg.Clock.Now().UTC()
		}
		return
	}
	if !n.Info.Ready {
		n.Info.Reason = st.reason
	}
}

// startTimer deletes the node's pod if it is not running within the start timeout.
// Callers hold d.mu.
func (d *Driver) startTimer(n *node) {
	wait := d.cfg.StartTimeout - d.cfg.Clock.Since(n.Seen)
	t := d.cfg.Clock.NewTimer(max(wait, 0))
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		defer t.Stop()
		select {
		case <-n.Context().Done():
			return
		case <-t.C():
		}
		d.mu.Lock()
		if !d.nodes.Current(n) || n.Info.Ready {
			d.mu.Unlock()
			return
		}
		why := fmt.Sprintf("the pod was not running within the start timeout (%s): %s", d.cfg.StartTimeout, n.Info.Reason)
		d.nodes.Drop(n)
		d.mu.Unlock()
		d.log.Warn("node did not start in time, deleting its pod", "node", n.Key, "pod", n.name, "reason", why)
		d.deletePod(n.name, n.uid, deleteGrace)
		d.emit(driver.Event{Kind: driver.NodeGone, NodeKey: n.Key, Reason: why})
	}()
}

// deletePod deletes a pod in the background of whatever asked (a watch): errors are logged.
func (d *Driver) deletePod(name string, uid types.UID, grace int64) {
	ctx, cancel := context.WithTimeout(d.ctx, 30*time.Second)
	defer cancel()
	err := d.cs.CoreV1().Pods(d.cfg.Namespace).Delete(ctx, name, metav1.DeleteOptions{
		GracePeriodSeconds: &grace, Preconditions: &metav1.Preconditions{UID: &uid},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		d.log.Warn("deleting a pod", "pod", name, "error", err)
	}
}

// onPod handles a pod's creation or change: readiness, a new pending reason, or its end.
func (d *Driver) onPod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	key, ok := d.ours(pod)
	if !ok {
		return
	}
	d.mu.Lock()
	n, ok := d.nodes.Get(key)
	if !ok || !d.nodes.Current(n) || n.uid != pod.UID {
		d.mu.Unlock()
		return
	}
	st := stateOf(pod)
	switch {
	case st.gone:
		d.nodes.Drop(n)
		d.mu.Unlock()
		d.log.Warn("node gone", "node", key, "pod", pod.Name, "reason", st.reason)
		if pod.DeletionTimestamp == nil {
			// Stuck on its image, or ended: it holds no process worth keeping.
			d.wg.Add(1)
			go func() { defer d.wg.Done(); d.deletePod(pod.Name, pod.UID, deleteGrace) }()
		}
		d.emit(driver.Event{Kind: driver.NodeGone, NodeKey: key, Reason: st.reason})
	case st.ready && !n.Info.Ready:
		d.update(n, pod, st)
		d.watchTaskContainers(n, pod)
		d.mu.Unlock()
		d.log.Debug("node ready", "node", key, "pod", pod.Name, "address", pod.Status.PodIP)
		d.emit(driver.Event{Kind: driver.NodeReady, NodeKey: key})
	default:
		d.update(n, pod, st)
		d.watchTaskContainers(n, pod)
		reason := n.Info.Reason
		send := !n.Info.Ready && reason != n.waitingSent && unschedulable(reason)
		if send {
			n.waitingSent = reason
		}
		d.mu.Unlock()
		if send {
			// The scheduler's message: the node says why within seconds, not "Pending".
			d.emit(driver.Event{Kind: driver.NodeWaiting, NodeKey: key, Reason: reason})
		}
	}
}

// onDelete handles a pod that is gone from the API: Terminate's wait ends, and a watched
// node that nobody released is NodeGone.
func (d *Driver) onDelete(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		tomb, ok := obj.(cache.DeletedFinalStateUnknown)
		if !ok {
			return
		}
		if pod, ok = tomb.Obj.(*corev1.Pod); !ok {
			return
		}
	}
	d.mu.Lock()
	for _, ch := range d.waiters[pod.Name] {
		close(ch)
	}
	delete(d.waiters, pod.Name)
	key, ours := d.ours(pod)
	n, watched := d.nodes.Get(key)
	if !ours || !watched || !d.nodes.Current(n) || n.uid != pod.UID {
		d.mu.Unlock()
		return
	}
	d.nodes.Drop(n)
	d.mu.Unlock()
	why := stateOf(pod).reason
	if why == "" || !strings.HasPrefix(why, "the pod") {
		why = "the pod was deleted"
	}
	d.log.Warn("node gone", "node", key, "pod", pod.Name, "reason", why)
	d.emit(driver.Event{Kind: driver.NodeGone, NodeKey: key, Reason: why})
}

// Describe returns a live node (watching it) or ErrNotFound.
func (d *Driver) Describe(ctx context.Context, key string) (driver.NodeInfo, error) {
	if err := checkKey(key); err != nil {
		return driver.NodeInfo{}, driver.NotFound(err)
	}
	pod, err := d.livePod(ctx, key)
	if err != nil {
		return driver.NodeInfo{}, fmt.Errorf("describing node %s: %w", key, err)
	}
	info, gone, _ := d.adopt(ctx, pod, true)
	if gone {
		return driver.NodeInfo{}, fmt.Errorf("describing node %s: %w", key, driver.ErrNotFound)
	}
	return info, nil
}

// livePod returns the pod of a node key from the watch's cache (the API when the cache
// does not have it yet); ErrNotFound when there is none or it is gone.
func (d *Driver) livePod(ctx context.Context, key string) (*corev1.Pod, error) {
	name := d.podName(key)
	pod, err := d.pods.Get(name)
	if apierrors.IsNotFound(err) {
		pod, err = d.cs.CoreV1().Pods(d.cfg.Namespace).Get(ctx, name, metav1.GetOptions{})
	}
	switch {
	case apierrors.IsNotFound(err):
		d.nodes.Forget(key)
		return nil, driver.ErrNotFound
	case err != nil:
		return nil, classify(err)
	}
	if k, ok := d.ours(pod); !ok || k != key || stateOf(pod).gone {
		d.nodes.Forget(key)
		return nil, driver.ErrNotFound
	}
	return pod, nil
}

// List returns the live nodes of owner ("" for all of this engine's), watching them.
func (d *Driver) List(ctx context.Context, owner string) ([]driver.NodeInfo, error) {
	pods, err := d.pods.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	var out []driver.NodeInfo
	listed := map[string]bool{}
	for _, pod := range pods {
		key, ok := d.ours(pod)
		if !ok || (owner != "" && pod.Annotations[AnnotationOwner] != owner) {
			continue
		}
		listed[key] = true
		if info, gone, _ := d.adopt(ctx, pod, true); !gone {
			out = append(out, info)
		}
	}
	// The informer's cache lags the API by a watch event: a pod this driver has just
	// created may not be in it yet, and it is a node all the same.
	d.mu.Lock()
	defer d.mu.Unlock()
	for key, n := range d.nodes.All() {
		if !listed[key] && !n.Terminating && (owner == "" || n.Info.Owner == owner) {
			out = append(out, n.Info)
		}
	}
	return out, nil
}

// Terminate deletes the node's pod and returns once the watch confirms it is gone.
func (d *Driver) Terminate(ctx context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return nil // no node ever had this key
	}
	unlock := d.lockKey(key)
	defer unlock()
	// Its tasks' watchers end now: their exec streams would only break.
	d.nodes.MarkTerminating(key, true)
	if err := d.deleteAndWait(ctx, d.podName(key), ""); err != nil {
		d.nodes.Forget(key) // watched afresh by the next call that names it
		return fmt.Errorf("terminating node %s: %w", key, err)
	}
	d.nodes.Forget(key)
	d.log.Debug("node released", "node", key)
	return nil
}

// deleteAndWait deletes a pod (of uid, when given) with a short grace period and waits
// until the watch reports it gone; after forceAfter it deletes it again without one.
func (d *Driver) deleteAndWait(ctx context.Context, name string, uid types.UID) error {
	gone := make(chan struct{})
	d.mu.Lock()
	d.waiters[name] = append(d.waiters[name], gone)
	d.mu.Unlock()
	defer d.dropWaiter(name, gone)
	// del deletes the pod; existed says the API still had it.
	del := func(grace int64) (existed bool, err error) {
		opts := metav1.DeleteOptions{GracePeriodSeconds: &grace}
		if uid != "" {
			opts.Preconditions = &metav1.Preconditions{UID: &uid}
		}
		err = d.cs.CoreV1().Pods(d.cfg.Namespace).Delete(ctx, name, opts)
		switch {
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
			return false, nil
		case err != nil:
			return false, classify(err)
		}
		return true, nil
	}
	existed, err := del(deleteGrace)
	if err != nil {
		return err
	}
	if !existed && !d.cached(name, uid) {
		return nil
	}
	// The pod exists, or the cache still shows it: its deletion is an event of the watch.
	force := d.cfg.Clock.NewTimer(forceAfter)
	defer force.Stop()
	for {
		select {
		case <-gone:
			return nil
		case <-ctx.Done():
			return driver.Transient(fmt.Errorf("waiting for pod %s to go: %w", name, ctx.Err()))
		case <-force.C():
			d.log.Warn("pod not gone after its grace period, deleting it without one", "pod", name)
			existed, err := del(0)
			if err != nil {
				return err
			}
			if !existed {
				// Gone from the API while the watch did not see it (a gap the informer
				// closed by listing again).
				return nil
			}
			force.Reset(forceAfter)
		}
	}
}

// cached reports whether the watch's cache holds the pod (of uid, when given).
func (d *Driver) cached(name string, uid types.UID) bool {
	pod, err := d.pods.Get(name)
	return err == nil && (uid == "" || pod.UID == uid)
}

func (d *Driver) dropWaiter(name string, ch chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	ws := d.waiters[name]
	for i, w := range ws {
		if w == ch {
			ws = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) == 0 {
		delete(d.waiters, name)
	} else {
		d.waiters[name] = ws
	}
}

func (d *Driver) emit(ev driver.Event) {
	select {
	case d.events <- ev:
	case <-d.ctx.Done():
	}
}

// classify marks an API error with its kind: a cluster that does not answer or is
// overloaded is transient, a quota is no capacity, a refusal (forbidden, invalid, a
// missing namespace) is permanent.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var netErr net.Error
	switch {
	case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota"):
		return driver.NoCapacity(err)
	case apierrors.IsTimeout(err), apierrors.IsServerTimeout(err), apierrors.IsTooManyRequests(err),
		apierrors.IsServiceUnavailable(err), apierrors.IsInternalError(err), apierrors.IsUnexpectedServerError(err):
		return driver.Transient(err)
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err), apierrors.IsInvalid(err),
		apierrors.IsBadRequest(err), apierrors.IsNotFound(err), apierrors.IsMethodNotSupported(err):
		return driver.Permanent(err)
	case errors.As(err, &netErr), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return driver.Transient(err)
	}
	return err
}

var keyRE = lazyregexp.New(`^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$`)

func checkKey(key string) error {
	if !keyRE.MatchString(key) {
		return fmt.Errorf("invalid node key %q", key)
	}
	return nil
}

// taskStore is the wrapper's store of tasks in a node's pod (package ssh's TaskStore, run
// through pods/exec).
func (d *Driver) taskStore(pod string) ssh.TaskStore {
	return ssh.TaskStore{Shell: podShell{d: d, pod: pod}, Dir: tasksDir}
}

var (
	klogOnce   sync.Once
	klogLogger atomic.Pointer[hclog.Logger]
)

// routeKlog sends client-go's own log lines (klog: a closed exec stream, a watch that
// reconnects) to the engine's logger at debug level instead of its stderr; the last
// driver started gets them.
func routeKlog(log hclog.Logger) {
	l := log.Named("client-go")
	klogLogger.Store(&l)
	klogOnce.Do(func() {
		klog.LogToStderr(false)
		klog.SetOutput(klogWriter{})
	})
}

type klogWriter struct{}

func (klogWriter) Write(p []byte) (int, error) {
	if l := klogLogger.Load(); l != nil {
		(*l).Debug(strings.TrimSpace(string(p)))
	}
	return len(p), nil
}
