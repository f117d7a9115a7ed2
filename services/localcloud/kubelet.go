package localcloud

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/services/localcloud/ignitionfs"
)

// Node facts every machine reports.
const (
	nodeLeaseNamespace   = "kube-node-lease"
	nodeLeaseDuration    = 40 // seconds, the kubelet's default
	containerRuntime     = "containerd://2.1.4"
	kernelVersion        = "6.12.0-hostplane-localcloud"
	osImage              = "Hostplane local cloud"
	annotationAttachByCM = "volumes.kubernetes.io/controller-managed-attach-detach"
)

// ephemeralStorage is every machine's disk, whatever its type.
var ephemeralStorage = resource.MustParse("100Gi")

// shape is what a machine's Node reports of its instance type: capacity (allocatable is the
// same: the simulated kubelet reserves nothing) and the labels a cloud kubelet registers with.
type shape struct {
	instanceType api.InstanceType
	zone         string
	capacityType string
	capacity     corev1.ResourceList
}

// machineShape is the shape of spec's instance type (a machine created before instance types
// has none: it is api.DefaultInstanceType, as it always was).
func machineShape(spec MachineSpec) (shape, error) {
	it, ok := api.LocalInstanceType(spec.InstanceType)
	if !ok {
		return shape{}, fmt.Errorf("unknown instance type %q", spec.InstanceType)
	}
	mem, err := resource.ParseQuantity(it.Memory)
	if err != nil {
		return shape{}, fmt.Errorf("instance type %s: memory %q: %w", it.Name, it.Memory, err)
	}
	return shape{
		instanceType: it,
		zone:         cmp.Or(spec.Zone, it.Zones[0]),
		capacityType: cmp.Or(spec.CapacityType, api.CapacityTypeOnDemand),
		capacity: corev1.ResourceList{
			corev1.ResourceCPU:              *resource.NewQuantity(int64(it.CPU), resource.DecimalSI),
			corev1.ResourceMemory:           mem,
			corev1.ResourcePods:             *resource.NewQuantity(int64(it.MaxPods), resource.DecimalSI),
			corev1.ResourceEphemeralStorage: ephemeralStorage,
		},
	}, nil
}

// labels are the Node labels of the shape, those a cloud kubelet sets from its cloud's
// instance metadata.
func (s shape) labels() map[string]string {
	arch := s.instanceType.Architecture
	return map[string]string{
		api.LabelOS:               "linux",
		api.LabelArch:             arch,
		api.LabelInstanceType:     s.instanceType.Name,
		corev1.LabelInstanceType:  s.instanceType.Name, // beta.kubernetes.io/instance-type
		api.LabelZone:             s.zone,
		api.LabelCapacityType:     s.capacityType,
		"beta.kubernetes.io/os":   "linux",
		"beta.kubernetes.io/arch": arch,
	}
}

// kubelet is a joined machine's node agent: it registers the Node, renews its Lease, posts
// its status, reports its pods Running and applies in-place updates.
type kubelet struct {
	m          *machine
	cs         kubernetes.Interface
	ip         string
	providerID string
	shape      shape

	mu         sync.Mutex
	cfg        KubeletConfig
	nodeUID    types.UID
	lease      *coordinationv1.Lease
	readySince metav1.Time
}

// kubelet runs the node agent of a joined machine until ctx ends. An error means the machine
// cannot run as it is (its disk lost its config): its credentials are dropped, so it boots again.
func (m *machine) kubelet(ctx context.Context) error {
	creds := m.credentials()
	nc, err := readNodeConfig(m.root())
	if err != nil {
		m.forget()
		return fmt.Errorf("kubelet: %w", err)
	}
	cs, tr, err := nodeClient(nc, creds)
	if err != nil {
		m.forget()
		return fmt.Errorf("kubelet: %w", err)
	}
	defer tr.CloseIdleConnections()
	m.mu.Lock()
	ip, spec := m.rec.IP, m.rec.Spec
	m.mu.Unlock()
	sh, err := machineShape(spec)
	if err != nil {
		return fmt.Errorf("kubelet: %w", err) // the cloud validated the type: cannot happen
	}
	k := &kubelet{m: m, cs: cs, ip: ip, providerID: spec.ProviderID, shape: sh, cfg: nc.Kubelet, readySince: metav1.Now()}

	for attempt := 1; ; attempt++ {
		err := k.register(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		m.setMessage("registering the node: " + err.Error())
		m.log.Warn("node registration failed; retrying", "error", err)
		m.sleep(ctx, backoff(attempt))
	}
	k.postStatus(ctx)
	m.update(func(r *record) {
		if r.Status.State != StateStopped {
			r.Status.State, r.Status.NodeName, r.Status.Message = StateRunning, m.name, ""
		}
	})
	m.log.Info("node running")

	var wg sync.WaitGroup
	wg.Go(func() { k.heartbeats(ctx) })
	wg.Go(func() { k.pods(ctx) })
	k.updates(ctx)
	wg.Wait()
	return nil
}

func (k *kubelet) config() KubeletConfig {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.cfg
}

// register creates the machine's Node, or adopts the one it created before a restart.
func (k *kubelet) register(ctx context.Context) error {
	cfg := k.config()
	name := k.m.name
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: k.nodeLabels(cfg.NodeLabels),
			Annotations: map[string]string{
				api.AnnotationCurrentConfig: cfg.ConfigHash,
				annotationAttachByCM:        "true",
			},
		},
		Spec: corev1.NodeSpec{ProviderID: k.providerID, Taints: cfg.Taints},
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	created, err := k.cs.CoreV1().Nodes().Create(rctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = k.cs.CoreV1().Nodes().Get(rctx, name, metav1.GetOptions{})
	}
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.nodeUID = created.UID
	k.mu.Unlock()
	return nil
}

// nodeLabels are the kubelet's own labels (hostname, and those of its instance type: OS,
// architecture, instance type, zone, capacity type) plus those of kubelet.json (the real
// kubelet's --node-labels) a node may set on itself (the NodeRestriction admission plugin
// refuses the others: the kubelet would not start). They are the Node's labels at
// registration, as a real kubelet registers them.
func (k *kubelet) nodeLabels(fromConfig map[string]string) map[string]string {
	labels := map[string]string{}
	for l, v := range fromConfig {
		if nodeMaySetLabel(l) {
			labels[l] = v
		} else {
			k.m.log.Warn("node label skipped: a node may not set it on itself", "label", l)
		}
	}
	maps.Copy(labels, k.shape.labels())
	labels[corev1.LabelHostname] = k.m.name
	return labels
}

// nodeMaySetLabel reports whether the NodeRestriction admission plugin lets a node set label
// on its own Node (k8s.io/kubelet/pkg/apis IsKubeletLabel).
func nodeMaySetLabel(label string) bool {
	ns, _, ok := strings.Cut(label, "/")
	if !ok {
		return true
	}
	under := func(suffix string) bool { return ns == suffix || strings.HasSuffix(ns, "."+suffix) }
	if under(corev1.LabelNamespaceNodeRestriction) {
		return false
	}
	if !under("kubernetes.io") && !under("k8s.io") {
		return true
	}
	switch label {
	case corev1.LabelHostname, corev1.LabelTopologyZone, corev1.LabelTopologyRegion,
		corev1.LabelFailureDomainBetaZone, corev1.LabelFailureDomainBetaRegion,
		corev1.LabelInstanceType, corev1.LabelInstanceTypeStable,
		corev1.LabelOSStable, corev1.LabelArchStable, "beta.kubernetes.io/os", "beta.kubernetes.io/arch":
		return true
	}
	return under(corev1.LabelNamespaceSuffixKubelet) || under(corev1.LabelNamespaceSuffixNode)
}

// heartbeats renews the Lease every HeartbeatInterval and re-posts the status every
// StatusEvery beats, until ctx ends; the StopHeartbeats fault silences both.
func (k *kubelet) heartbeats(ctx context.Context) {
	every := k.m.c.cfg.HeartbeatInterval
	t := time.NewTicker(every)
	defer t.Stop()
	beat, statusDue := 1, false // the status was just posted at registration
	for {
		if k.m.fault() != api.FaultStopHeartbeats {
			if err := k.renewLease(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				statusDue = true // the node may be marked Unknown meanwhile: say Ready again once back
				k.m.log.Debug("lease renewal failed", "error", err)
			} else if statusDue || beat%k.m.c.cfg.StatusEvery == 0 {
				statusDue = !k.postStatus(ctx)
			}
			beat++
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// renewLease creates or renews the node's Lease in kube-node-lease.
func (k *kubelet) renewLease(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	leases := k.cs.CoordinationV1().Leases(nodeLeaseNamespace)
	k.mu.Lock()
	lease, uid := k.lease, k.nodeUID
	k.mu.Unlock()
	now := metav1.NowMicro()
	var err error
	if lease == nil {
		lease, err = leases.Get(ctx, k.m.name, metav1.GetOptions{})
	}
	switch {
	case apierrors.IsNotFound(err):
		lease, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Name: k.m.name, Namespace: nodeLeaseNamespace,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: k.m.name, UID: uid}},
			},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       &k.m.name,
				LeaseDurationSeconds: new(int32(nodeLeaseDuration)),
				RenewTime:            &now,
			},
		}, metav1.CreateOptions{})
	case err == nil:
		lease = lease.DeepCopy()
		lease.Spec.RenewTime = &now
		lease.Spec.HolderIdentity = &k.m.name
		lease, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	}
	if err != nil {
		lease = nil // read it again next time
	}
	k.mu.Lock()
	k.lease = lease
	k.mu.Unlock()
	return err
}

// postStatus patches the node's status (a node may patch nodes/status, not read it): Ready,
// no pressure, addresses, capacity and node info. It reports whether the post went through.
func (k *kubelet) postStatus(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	cfg := k.config()
	k.mu.Lock()
	since := k.readySince
	k.mu.Unlock()
	now := metav1.Now()
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: since}
	}
	status := corev1.NodeStatus{
		Capacity:    k.shape.capacity,
		Allocatable: k.shape.capacity,
		Conditions: []corev1.NodeCondition{
			cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
			cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
			cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
			cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
		},
		Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: k.ip},
			{Type: corev1.NodeHostName, Address: k.m.name},
		},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
		NodeInfo: corev1.NodeSystemInfo{
			MachineID:               digest([]byte(k.m.key()))[:32],
			SystemUUID:              digest([]byte("uuid/" + k.m.key()))[:32],
			BootID:                  digest([]byte(fmt.Sprintf("boot/%s/%d", k.m.key(), k.m.status().Boots)))[:32],
			KernelVersion:           kernelVersion,
			OSImage:                 osImage,
			ContainerRuntimeVersion: containerRuntime,
			KubeletVersion:          cfg.KubeletVersion,
			OperatingSystem:         "linux",
			Architecture:            k.shape.instanceType.Architecture,
		},
	}
	patch, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return false
	}
	_, err = k.cs.CoreV1().Nodes().Patch(ctx, k.m.name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		if ctx.Err() == nil {
			k.m.log.Debug("node status not posted", "error", err)
		}
		return false
	}
	return true
}

// updates applies in-place updates (Reconfigure) as they come, until ctx ends.
func (k *kubelet) updates(ctx context.Context) {
	if k.m.pending() != nil {
		k.m.signal()
	}
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-k.m.wake:
		}
		userData := k.m.pending()
		if userData == nil {
			continue
		}
		err := k.reconfigure(ctx, userData)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, errSuperseded):
			k.m.signal()
		case err != nil:
			failures++
			k.m.setMessage("in-place update failed: " + err.Error())
			k.m.log.Warn("in-place update failed; retrying", "error", err)
			k.m.sleep(ctx, backoff(failures))
			k.m.signal()
		default:
			failures = 0
		}
	}
}

// reconfigure applies an in-place update: fetch the Ignition config with the new stub,
// validate it, write its files, then tell the cluster: the current-config annotation and the
// labels of the new kubelet.json on the Node, the new kubelet version in its status. Taints
// are not touched: a node may not change its own (nodepoold sets them).
func (k *kubelet) reconfigure(ctx context.Context, userData []byte) error {
	m := k.m
	m.log.Info("applying an in-place update")
	superseded := func() bool { return !bytes.Equal(m.pending(), userData) }
	cfg, err := m.c.guest.ignition(ctx, userData, fetchHooks{wake: m.wake, retry: func(err error) error {
		if superseded() {
			return errSuperseded
		}
		m.setMessage("in-place update: fetching the Ignition config: " + err.Error())
		return nil
	}})
	if err != nil {
		return err
	}
	if err := ignitionfs.Apply(m.root(), cfg, true); err != nil {
		return err
	}
	nc, err := readNodeConfig(m.root())
	if err != nil {
		return err
	}
	old := k.config()
	labels := map[string]any{}
	for l := range old.NodeLabels {
		if _, keep := nc.Kubelet.NodeLabels[l]; !keep && nodeMaySetLabel(l) {
			labels[l] = nil
		}
	}
	for l, v := range k.nodeLabels(nc.Kubelet.NodeLabels) {
		labels[l] = v
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"labels":      labels,
		"annotations": map[string]string{api.AnnotationCurrentConfig: nc.Kubelet.ConfigHash},
	}})
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := k.cs.CoreV1().Nodes().Patch(pctx, m.name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patch the node: %w", err)
	}
	k.mu.Lock()
	k.cfg = nc.Kubelet
	k.mu.Unlock()
	if !k.postStatus(ctx) {
		return fmt.Errorf("post the node status with kubelet %s: %w", nc.Kubelet.KubeletVersion, errStatusNotPosted)
	}
	m.update(func(r *record) {
		r.Status.ConfigHash, r.Status.KubeletVersion = nc.Kubelet.ConfigHash, nc.Kubelet.KubeletVersion
		r.AppliedUserData = digest(userData)
		r.Spec.UserData = userData
		if bytes.Equal(r.PendingUserData, userData) {
			r.PendingUserData = nil
			if r.Status.State == StateRunning {
				r.Status.Message = ""
			}
		}
	})
	m.log.Info("in-place update applied", "configHash", nc.Kubelet.ConfigHash, "kubeletVersion", nc.Kubelet.KubeletVersion)
	return nil
}
