package kubernetes

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/containerrt"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/ssh"
)

// An environment's image archive reaches an attached cluster through its nodes'
// containerd: the cluster's nodes run images their containerd holds, and cannot pull one
// that is only a file on the engine's machine. Before a pod of a driver whose Config names
// an Archive, the driver imports it on every ready node that the pods may run on and that
// does not hold it yet (importedHosts), a few nodes at a time. On each, a pod of
// Archive.ImportImage is started with the node's containerd socket mounted (its path from
// the kubelet's configuration, else containerd's default); through that pod's shell the
// driver copies the engine's binary and the archive and imports the image into the
// kubelet's namespace under Config.Image (ImageImporter: ssh.ContainerRunner.ImportImage,
// the code that imports on attached machines). The pod is deleted once the import is over.
// The driver's pods are pinned, by node affinity, to the nodes that hold the image, and the
// scheduler places them among those: a multi-node job spreads as any other would. A node
// whose import fails is left out of that pod's choice and tried again for the next pod; a
// node that joins later is imported on at the next pod. A driver made again (an engine
// restart) imports again, which finds the image there.

// ImageArchive is an environment's image archive that a driver's pods run, once imported.
type ImageArchive struct {
	// Path is the archive on the engine's machine; Hash the environment's content hash,
	// which names the image (containerrt.ImageName: Config.Image).
	Path, Hash string
	// ImportImage is the image of the pod that imports it: it needs /bin/sh and the usual
	// utilities (the cluster's own image).
	ImportImage string
}

// ImageImporter imports an image archive into the containerd of the machine a shell
// reaches: ssh.ContainerRunner, which runs the engine's own binary there.
type ImageImporter interface {
	ImportImage(ctx context.Context, sh ssh.Shell, dir, archive, hash, address, namespace string) error
}

// errNoImporter refuses an archive when the driver has no ImageImporter.
var errNoImporter = driver.Permanent(errors.New("this engine cannot import an image archive into a cluster's nodes: it does so with its own binary, which must be a Linux one"))

// importDeadline bounds an import pod's life, so one that an engine stopped in the middle
// of an import left behind goes by itself.
const importDeadline = int64(3600)

// importMount is where an import pod sees the directory of its node's containerd socket.
const importMount = "/run/mlcompute-containerd"

// hostnameLabel is the node label the pods of an imported image are pinned by.
const hostnameLabel = "kubernetes.io/hostname"

// importParallel bounds the imports that run at once (each streams the archive to its
// node).
const importParallel = 4

// importedHosts imports the driver's archive on every ready node that a pod of spec may
// run on, and returns the host names of those that hold it. It fails only when none does,
// with the first node's error.
func (d *Driver) importedHosts(ctx context.Context, spec driver.NodeSpec) ([]string, error) {
	_, _, selector, err := resources(d.ps, spec)
	if err != nil {
		return nil, driver.Permanent(err)
	}
	nodes, err := d.readyNodes(ctx, selector)
	if err != nil {
		return nil, err
	}
	var (
		mu       sync.Mutex
		hosts    []string
		firstErr error
		wg       sync.WaitGroup
		slots    = make(chan struct{}, importParallel)
	)
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			err := d.importOnce(ctx, n.Name, *d.cfg.Archive)
			<-slots
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				firstErr = cmp.Or(firstErr, err)
				d.log.Warn("cannot import the image archive on a node; this pod may not run there", "node", n.Name, "error", err)
				return
			}
			hosts = append(hosts, cmp.Or(n.Labels[hostnameLabel], n.Name))
		}()
	}
	wg.Wait()
	if len(hosts) == 0 {
		return nil, firstErr
	}
	slices.Sort(hosts)
	return hosts, nil
}

// readyNodes are the ready, schedulable nodes whose labels match selector.
func (d *Driver) readyNodes(ctx context.Context, selector map[string]string) ([]corev1.Node, error) {
	list, err := d.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(selector).String()})
	if err != nil {
		return nil, fmt.Errorf("listing the cluster's nodes to import the image archive on: %w", classify(err))
	}
	nodes := slices.DeleteFunc(list.Items, func(n corev1.Node) bool { return n.Spec.Unschedulable || !nodeReady(&n) })
	if len(nodes) == 0 {
		return nil, driver.Transient(fmt.Errorf("no ready node of the cluster matches the pods' node selector %v to import the image archive on", selector))
	}
	return nodes, nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// importOnce imports archive a on a node (by its name) unless this driver did: once per
// node and content hash (an engine restart imports again, which finds the image there).
func (d *Driver) importOnce(ctx context.Context, node string, a ImageArchive) error {
	key := node + "/" + a.Hash
	unlock := d.importing.Lock(key)
	defer unlock()
	d.importMu.Lock()
	done := d.imported[key]
	d.importMu.Unlock()
	if done {
		return nil
	}
	if err := d.importOn(ctx, node, a); err != nil {
		return err
	}
	d.importMu.Lock()
	if d.imported == nil {
		d.imported = map[string]bool{}
	}
	d.imported[key] = true
	d.importMu.Unlock()
	d.log.Info("imported an image archive into a node's containerd", "node", node, "hash", a.Hash)
	return nil
}

// importOn imports archive a on a node (by its name) through a pod of its own, deleted at
// the end.
func (d *Driver) importOn(ctx context.Context, node string, a ImageArchive) error {
	if d.cfg.Importer == nil {
		return errNoImporter
	}
	socket := d.containerdSocket(ctx, node)
	pod := importPod(d.ps, a, node, path.Dir(socket))
	created, err := d.cs.CoreV1().Pods(d.cfg.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("starting the pod that imports the image archive: %w", classify(err))
	}
	defer d.deletePod(created.Name, created.UID, 0)
	if err := d.awaitRunning(ctx, created.Name); err != nil {
		return err
	}
	err = d.cfg.Importer.ImportImage(ctx, podShell{d: d, pod: created.Name}, "/tmp/mlcompute", a.Path, a.Hash,
		importMount+"/"+path.Base(socket), containerrt.KubernetesNamespace)
	if err != nil {
		return fmt.Errorf("importing the image archive on node %s: %w", node, err)
	}
	return nil
}

// importPod is the pod that imports archive a on node: of its import image, as root (the
// socket is root's), with the socket's directory mounted, and nothing else. Its name is
// new each time (a suffix of random letters), so a pod an earlier import left is in no
// one's way.
func importPod(ps podSpec, a ImageArchive, node, socketDir string) *corev1.Pod {
	root, no := int64(0), false
	deadline := importDeadline
	hostPathDir := corev1.HostPathDirectory
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      dnsLabel(ps.engineID + "-import-" + hex.EncodeToString(suffix)),
			Namespace: ps.namespace,
			Labels:    map[string]string{LabelEngine: labelValue(ps.engineID)},
		},
		Spec: corev1.PodSpec{
			NodeName:                     node,
			RestartPolicy:                corev1.RestartPolicyNever,
			ActiveDeadlineSeconds:        &deadline,
			AutomountServiceAccountToken: &no,
			Containers: []corev1.Container{{
				Name: containerName, Image: a.ImportImage, ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         []string{"sh", "-c", holderScript},
				SecurityContext: &corev1.SecurityContext{RunAsUser: &root},
				VolumeMounts:    []corev1.VolumeMount{{Name: "containerd", MountPath: importMount}},
			}},
			Volumes: []corev1.Volume{{Name: "containerd", VolumeSource: corev1.VolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: socketDir, Type: &hostPathDir},
			}}},
		},
	}
}

// awaitRunning waits for a pod to run, or fails with why it does not.
func (d *Driver) awaitRunning(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.StartTimeout)
	defer cancel()
	var why string
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pod, err := d.cs.CoreV1().Pods(d.cfg.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, classify(err)
		}
		st := stateOf(pod)
		switch {
		case st.gone:
			return false, driver.Permanent(fmt.Errorf("the pod that imports the image archive ended: %s", st.reason))
		case pod.Status.Phase == corev1.PodRunning:
			return true, nil
		}
		why = st.reason
		return false, nil
	})
	if err != nil && ctx.Err() != nil {
		return driver.Transient(fmt.Errorf("the pod that imports the image archive did not run within %s: %s", d.cfg.StartTimeout, why))
	}
	return err
}

// containerdSocket is the path of a node's containerd socket: the kubelet's container
// runtime endpoint, read from its configuration through the API server, else containerd's
// default.
func (d *Driver) containerdSocket(ctx context.Context, node string) string {
	client, ok := d.cs.CoreV1().RESTClient().(*rest.RESTClient)
	if !ok || client == nil {
		return containerrt.DefaultAddress // client-go's fake clientset (unit tests)
	}
	raw, err := client.Get().AbsPath("/api/v1/nodes", node, "proxy", "configz").DoRaw(ctx)
	if err != nil {
		d.log.Debug("cannot read the kubelet's configuration; assuming containerd's default socket", "node", node, "error", err)
		return containerrt.DefaultAddress
	}
	var cfg struct {
		KubeletConfig struct {
			ContainerRuntimeEndpoint string `json:"containerRuntimeEndpoint"`
		} `json:"kubeletconfig"`
	}
	if json.Unmarshal(raw, &cfg) != nil {
		return containerrt.DefaultAddress
	}
	endpoint := cfg.KubeletConfig.ContainerRuntimeEndpoint
	if socket, ok := strings.CutPrefix(endpoint, "unix://"); ok && path.IsAbs(socket) {
		return socket
	}
	return containerrt.DefaultAddress
}
