package kubernetes

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
)

// The labels and annotations of a node's pod. Label values are label-safe forms of the
// engine id, node key and owner (see labelValue); the annotations hold them as they are.
const (
	LabelEngine      = "mlcompute.dev/engine"
	LabelNode        = "mlcompute.dev/node"
	LabelOwner       = "mlcompute.dev/owner"
	AnnotationEngine = "mlcompute.dev/engine-id"
	AnnotationNode   = "mlcompute.dev/node-key"
	AnnotationOwner  = "mlcompute.dev/owner"
	AnnotationSize   = "mlcompute.dev/vm-size"
)

// GPUResource is the resource a node's GPUs are limited by.
const GPUResource = "nvidia.com/gpu"

// containerName is the name of a node pod's container (a task in an image runs in an
// ephemeral container beside it: container.go).
const containerName = "node"

// filesDir is an emptyDir in every node pod: the tasks' files and the environments built
// on the node live there, as long as the pod does.
const filesDir = "/mlcompute"

// holderScript is the pod's PID 1: it sleeps until the pod is deleted, and on SIGTERM
// passes the signal to every process of the container (the tasks) and exits, so a delete
// takes a moment instead of the grace period. Waiting on a child also reaps the
// processes the exec sessions leave behind (the task wrappers).
const holderScript = `trap 'kill -TERM -1 2>/dev/null; exit 0' TERM INT
while :; do sleep 3600 & wait $!; done`

// PodName is the pod of a node: a DNS-1123 label made of the engine id and the node key.
// When they are not a label as they are (upper case, '_' or '.', too long), the name is
// their lower-cased, cleaned prefix and a hash of both, so it stays deterministic (Create
// is idempotent under it) and distinct.
func PodName(engineID, key string) string {
	return dnsLabel(engineID + "-" + key)
}

// dnsLabel returns s when it is a DNS-1123 label, else a cleaned prefix of it with a hash
// of s.
func dnsLabel(s string) string {
	if isDNSLabel(s) {
		return s
	}
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	clean := strings.Trim(b.String(), "-")
	if len(clean) > 50 {
		clean = strings.TrimRight(clean[:50], "-")
	}
	h := sha256.Sum256([]byte(s))
	sum := hex.EncodeToString(h[:])[:10]
	if clean == "" {
		return "n-" + sum
	}
	return clean + "-" + sum
}

func isDNSLabel(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' && i > 0 && i < len(s)-1:
		default:
			return false
		}
	}
	return true
}

// labelValue is a label-safe form of s: s itself when it is one, else a cleaned prefix and
// a hash (the raw value goes in an annotation).
func labelValue(s string) string {
	if isLabelValue(s) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') || r == '-' || r == '_' || r == '.' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	clean := strings.Trim(b.String(), "-_.")
	if len(clean) > 50 {
		clean = strings.TrimRight(clean[:50], "-_.")
	}
	h := sha256.Sum256([]byte(s))
	sum := hex.EncodeToString(h[:])[:10]
	if clean == "" {
		return "h" + sum
	}
	return clean + "." + sum
}

func isLabelValue(s string) bool {
	if len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
		switch {
		case alnum:
		case (c == '-' || c == '_' || c == '.') && i > 0 && i < len(s)-1:
		default:
			return false
		}
	}
	return true
}

// podSpec is what buildPod needs besides the node's spec.
type podSpec struct {
	namespace    string
	engineID     string
	image        string
	nodeSelector map[string]string
	requestScale float64
	// hosts, when set, are the host names of the nodes that hold the pod's image (an
	// imported archive): the pod may run on those only.
	hosts []string
	// schedulingGates hold the pod before scheduling (the conformance suite makes nodes
	// ready from outside by removing them).
	schedulingGates []string
}

// buildPod is the pod of a node: see the package doc.
func buildPod(ps podSpec, spec driver.NodeSpec) (*corev1.Pod, error) {
	requests, limits, selector, err := resources(ps, spec)
	if err != nil {
		return nil, err
	}
	no := false
	grace := int64(5)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      PodName(ps.engineID, spec.Key),
			Namespace: ps.namespace,
			Labels: map[string]string{
				LabelEngine:                    labelValue(ps.engineID),
				LabelNode:                      labelValue(spec.Key),
				LabelOwner:                     labelValue(spec.Owner),
				"app.kubernetes.io/managed-by": "mlcompute",
			},
			Annotations: map[string]string{
				AnnotationEngine: ps.engineID,
				AnnotationNode:   spec.Key,
				AnnotationOwner:  spec.Owner,
			},
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			TerminationGracePeriodSeconds: &grace,
			NodeSelector:                  selector,
			Containers: []corev1.Container{{
				Name:            containerName,
				Image:           ps.image,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         []string{"/bin/sh", "-c", holderScript},
				WorkingDir:      filesDir,
				Resources:       corev1.ResourceRequirements{Requests: requests, Limits: limits},
				VolumeMounts:    []corev1.VolumeMount{{Name: "mlcompute", MountPath: filesDir}},
			}},
			Volumes: []corev1.Volume{{Name: "mlcompute", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
	if spec.VMSize != "" {
		pod.Annotations[AnnotationSize] = spec.VMSize
	}
	if spec.Pod != nil && spec.Pod.InstanceType != "" {
		pod.Annotations["mlcompute.dev/instance-type"] = spec.Pod.InstanceType
	}
	if size, ok := catalog.Lookup(spec.VMSize); ok && size.Isolated && spec.Pod == nil {
		pod.Spec.Affinity = isolatedAffinity(ps.engineID)
	}
	if len(ps.hosts) > 0 {
		if pod.Spec.Affinity == nil {
			pod.Spec.Affinity = &corev1.Affinity{}
		}
		pod.Spec.Affinity.NodeAffinity = onHosts(ps.hosts)
	}
	for _, g := range ps.schedulingGates {
		pod.Spec.SchedulingGates = append(pod.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: g})
	}
	return pod, nil
}

// isolatedAffinity keeps an isolated size's pod alone on its machine: no other node pod of
// the engine on the same host, either way (the scheduler honours a placed pod's required
// anti-affinity too).
func isolatedAffinity(engineID string) *corev1.Affinity {
	return &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{LabelEngine: labelValue(engineID)}},
			TopologyKey:   "kubernetes.io/hostname",
		}},
	}}
}

// onHosts lets a pod run only on the nodes of the given host names.
func onHosts(hosts []string) *corev1.NodeAffinity {
	return &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
			Key: hostnameLabel, Operator: corev1.NodeSelectorOpIn, Values: hosts,
		}}}},
	}}
}

// resources are a node pod's requests, limits and node selector: an attached compute's
// instance type (spec.Pod) as it is, else the VM size's vCPUs and memory, requested and
// limited, with its GPUs (from the catalog) as nvidia.com/gpu limits. requestScale, when
// in (0, 1), scales the requests of a VM size (not its limits) so that a small test
// cluster holds several nodes.
func resources(ps podSpec, spec driver.NodeSpec) (requests, limits corev1.ResourceList, selector map[string]string, err error) {
	selector = maps.Clone(ps.nodeSelector)
	if spec.Pod != nil {
		if requests, err = quantities("requests", spec.Pod.Requests); err != nil {
			return nil, nil, nil, err
		}
		if limits, err = quantities("limits", spec.Pod.Limits); err != nil {
			return nil, nil, nil, err
		}
		if len(spec.Pod.NodeSelector) > 0 && selector == nil {
			selector = map[string]string{}
		}
		maps.Copy(selector, spec.Pod.NodeSelector)
		return requests, limits, selector, nil
	}
	limits = corev1.ResourceList{}
	if spec.VCPUs > 0 {
		limits[corev1.ResourceCPU] = *resource.NewQuantity(spec.VCPUs, resource.DecimalSI)
	}
	if spec.MemoryGB > 0 {
		limits[corev1.ResourceMemory] = *resource.NewQuantity(int64(spec.MemoryGB*(1<<30)), resource.BinarySI)
	}
	requests = corev1.ResourceList{}
	for name, q := range limits {
		if ps.requestScale > 0 && ps.requestScale < 1 {
			switch name {
			case corev1.ResourceCPU:
				q = *resource.NewMilliQuantity(max(1, int64(float64(q.MilliValue())*ps.requestScale)), resource.DecimalSI)
			case corev1.ResourceMemory:
				q = *resource.NewQuantity(int64(float64(q.Value())*ps.requestScale), resource.BinarySI)
			}
		}
		requests[name] = q
	}
	if size, ok := catalog.Lookup(spec.VMSize); ok && size.GPUs > 0 {
		limits[GPUResource] = *resource.NewQuantity(size.GPUs, resource.DecimalSI)
	}
	return requests, limits, selector, nil
}

func quantities(what string, in map[string]string) (corev1.ResourceList, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := corev1.ResourceList{}
	for name, v := range in {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, fmt.Errorf("instance type %s %s: %q is not a quantity: %w", what, name, v, err)
		}
		out[corev1.ResourceName(name)] = q
	}
	return out, nil
}

// podState is what a pod says about its node.
type podState struct {
	ready bool
	// gone says the node is lost: the pod is being deleted, it ended, or it can never run
	// (its image cannot be pulled).
	gone bool
	// reason says why the node is not ready, or why it is gone.
	reason string
}

// fatalWaiting are container waiting reasons that never pass by themselves.
var fatalWaiting = map[string]bool{
	"ImagePullBackOff":  true,
	"ErrImageNeverPull": true,
	"InvalidImageName":  true,
}

// stateOf reads a pod's state: ready once its container runs and it has an IP; gone when
// deleted, ended or stuck on its image; else pending, with Kubernetes' reason.
func stateOf(pod *corev1.Pod) podState {
	if pod.DeletionTimestamp != nil {
		why := "the pod was deleted"
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
				why = "the pod was deleted: " + joinReason(c.Reason, c.Message)
			}
		}
		return podState{gone: true, reason: why}
	}
	switch pod.Status.Phase {
	case corev1.PodFailed, corev1.PodSucceeded:
		return podState{gone: true, reason: endReason(pod)}
	}
	if st := mainStatus(pod); st != nil {
		if t := st.State.Terminated; t != nil {
			return podState{gone: true, reason: "the pod's container ended: " + terminatedReason(t)}
		}
		if w := st.State.Waiting; w != nil && fatalWaiting[w.Reason] {
			return podState{gone: true, reason: joinReason(w.Reason, w.Message)}
		}
		if st.State.Running != nil && pod.Status.PodIP != "" && pod.Status.Phase == corev1.PodRunning {
			return podState{ready: true}
		}
	}
	return podState{reason: pendingReason(pod)}
}

// pendingReason is why a pod that is not running yet waits: held by a scheduling gate,
// unschedulable (with the scheduler's message), or its container's waiting reason.
func pendingReason(pod *corev1.Pod) string {
	if len(pod.Spec.SchedulingGates) > 0 {
		return "SchedulingGated"
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue && c.Reason != "" {
			return joinReason(c.Reason, c.Message)
		}
	}
	if st := mainStatus(pod); st != nil && st.State.Waiting != nil && st.State.Waiting.Reason != "" {
		return joinReason(st.State.Waiting.Reason, st.State.Waiting.Message)
	}
	if pod.Status.Phase == "" {
		return "Pending"
	}
	return string(pod.Status.Phase)
}

// unschedulable reports whether a pending reason is the scheduler's refusal to place the
// pod ("Unschedulable: 0/1 nodes are available: 1 Insufficient cpu."), which the engine
// shows on the node's compute as an error.
func unschedulable(reason string) bool {
	return strings.HasPrefix(reason, "Unschedulable")
}

// endReason says why a pod ended: the kubelet's reason (Evicted, with its message), else
// its container's (OOMKilled, Error and the exit code).
func endReason(pod *corev1.Pod) string {
	if pod.Status.Reason != "" {
		return "the pod ended: " + joinReason(pod.Status.Reason, pod.Status.Message)
	}
	if st := mainStatus(pod); st != nil && st.State.Terminated != nil {
		return "the pod ended: " + terminatedReason(st.State.Terminated)
	}
	return "the pod ended (" + string(pod.Status.Phase) + ")"
}

func terminatedReason(t *corev1.ContainerStateTerminated) string {
	why := t.Reason
	if why == "" {
		why = "exited"
	}
	why += " (exit code " + strconv.Itoa(int(t.ExitCode)) + ")"
	if t.Message != "" {
		why += ": " + strings.TrimSpace(t.Message)
	}
	return why
}

func mainStatus(pod *corev1.Pod) *corev1.ContainerStatus {
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == containerName {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	return nil
}

func joinReason(reason, message string) string {
	message = strings.TrimSpace(message)
	switch {
	case reason == "":
		return message
	case message == "":
		return reason
	}
	return reason + ": " + message
}
