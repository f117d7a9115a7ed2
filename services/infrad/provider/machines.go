package provider

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	crreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/hostplane/hostplane/apis/infrastructure/v1alpha1"
	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/events"
	"github.com/hostplane/hostplane/pkg/outbox"
	"github.com/hostplane/hostplane/pkg/store"
	"github.com/hostplane/hostplane/services/localcloud"
)

// DefaultResync is how often a running (or stopped) machine's status is read from the cloud
// again; a booting or failing one is read every bootPoll.
const (
	DefaultResync = 15 * time.Second
	bootPoll      = 2 * time.Second
)

// Phases of the machines gauge besides the cloud states.
const (
	phasePending  = "Pending"  // waiting for the Machine, its bootstrap data or a local cloud
	phaseMissing  = "Missing"  // provisioned, but the cloud has no such machine
	phaseDeleting = "Deleting" // the LocalMachine is being deleted
)

// machineID names a LocalMachine's cloud machine.
type machineID struct{ cluster, name, nodepool string }

// key is the machine events' key, "<cluster>/<machine>".
func (id machineID) key() string { return id.cluster + "/" + id.name }

// machineWorkers is how many LocalMachines are reconciled at once (each call may wait on
// the local cloud), so a pool's machines are provisioned together rather than in a queue.
const machineWorkers = 10

// setupMachineController registers the LocalMachine controller: it reconciles a LocalMachine
// when it or its Machine changes, and re-reads the cloud periodically.
func (p *Provider) setupMachineController() error {
	err := builder.ControllerManagedBy(p.mgr).
		Named("localmachine").
		WithOptions(controller.Options{MaxConcurrentReconciles: machineWorkers}).
		For(&infrav1.LocalMachine{}).
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(localMachineOf)).
		Complete(crreconcile.Func(p.reconcileMachine))
	if err != nil {
		return fmt.Errorf("LocalMachine controller: %w", err)
	}
	return nil
}

// localMachineOf maps a Machine to its LocalMachine (spec.infrastructureRef).
func localMachineOf(_ context.Context, o client.Object) []crreconcile.Request {
	m, ok := o.(*clusterv1.Machine)
	if !ok {
		return nil
	}
	ref := m.Spec.InfrastructureRef
	if ref.APIGroup != api.InfrastructureGroup || ref.Kind != api.KindLocalMachine || ref.Name == "" {
		return nil
	}
	return []crreconcile.Request{{NamespacedName: types.NamespacedName{Namespace: m.Namespace, Name: ref.Name}}}
}

// machineScope is one reconcile of one LocalMachine.
type machineScope struct {
	lm     *infrav1.LocalMachine
	before infrav1.LocalMachineStatus // the status as read
	m      *clusterv1.Machine         // the owner; nil until Cluster API sets it
	id     machineID
	log    *slog.Logger
	cloud  *localcloud.MachineStatus // what the cloud reported, if it was asked
	// platform is the machine's (its AnnotationPlatform once provisioned, its cluster's
	// before); backend its cloud, nil when that one is not configured.
	platform string
	backend  Cloud

	// Events to publish (resource "machine", key "<cluster>/<machine>", data the
	// api.Machine; listed in events.Published and docs/events.md).
	created, joined, changed bool
}

// reconcileMachine converges one LocalMachine with its cloud machine.
func (p *Provider) reconcileMachine(ctx context.Context, req crreconcile.Request) (crreconcile.Result, error) {
	lm := &infrav1.LocalMachine{}
	if err := p.client.Get(ctx, req.NamespacedName, lm); err != nil {
		if apierrors.IsNotFound(err) {
			p.phases.forget(req.NamespacedName)
			return crreconcile.Result{}, nil
		}
		return crreconcile.Result{}, err
	}
	m, err := p.ownerMachine(ctx, lm)
	if err != nil {
		return crreconcile.Result{}, err
	}
	id := identify(lm, m)
	s := &machineScope{lm: lm, m: m, id: id, log: p.log.With("cluster", id.cluster, "nodepool", id.nodepool, "machine", id.name)}
	lm.Status.DeepCopyInto(&s.before)
	if s.platform = lm.Annotations[infrav1.AnnotationPlatform]; s.platform == "" {
		if s.platform, err = p.clusterPlatform(ctx, id.cluster); err != nil {
			return crreconcile.Result{}, err
		}
	}
	s.backend = p.CloudFor(s.platform)
	if !lm.DeletionTimestamp.IsZero() {
		return p.finalizeMachine(ctx, s)
	}
	res, err := p.ensureMachine(ctx, s)
	if err := p.publish(ctx, s); err != nil {
		// The status stays as it was, so the next attempt publishes again.
		return crreconcile.Result{}, err
	}
	if perr := p.patchStatus(ctx, s); perr != nil {
		err = errors.Join(err, perr)
	}
	return res, err
}

// ensureMachine provisions the cloud machine once the Machine has bootstrap data, applies an
// InPlace userdata change and copies the cloud's status into the LocalMachine.
func (p *Provider) ensureMachine(ctx context.Context, s *machineScope) (crreconcile.Result, error) {
	lm := s.lm
	if p.notReadyToProvision(s) {
		return crreconcile.Result{}, nil
	}
	if !controllerutil.ContainsFinalizer(lm, infrav1.FinalizerLocalMachine) {
		err := p.patchObject(ctx, s, func(lm *infrav1.LocalMachine) { controllerutil.AddFinalizer(lm, infrav1.FinalizerLocalMachine) })
		if err != nil {
			return crreconcile.Result{}, err
		}
	}
	step := p.provision
	if provisioned(lm) {
		step = p.lookUp
	}
	st, done, res, err := step(ctx, s)
	if done {
		return res, err
	}
	waiting, done, res, err := p.reconfigureInPlace(ctx, s, &st)
	if done {
		return res, err
	}

	s.observe(st)
	p.phases.set(lm, s.id.cluster, st.State)
	if s.before.NodeName == "" && lm.Status.NodeName != "" {
		s.joined = true
		p.metrics.createToNodeReady.Observe(time.Since(s.m.CreationTimestamp.Time).Seconds())
		s.log.Info("the machine joined the cluster", "node", lm.Status.NodeName)
	}
	s.changed = statusChanged(s.before, lm.Status)
	if settled := st.State == localcloud.StateRunning || st.State == localcloud.StateStopped; settled && !waiting {
		return crreconcile.Result{RequeueAfter: p.resync}, nil
	}
	return crreconcile.Result{RequeueAfter: min(bootPoll, p.resync)}, nil
}

// notReadyToProvision reports (and says in Ready) what the machine still waits for before
// it can be provisioned: its owner Machine, a local cloud, the Machine's bootstrap data.
func (p *Provider) notReadyToProvision(s *machineScope) bool {
	var reason, msg string
	switch {
	case s.m == nil:
		reason, msg = infrav1.ReasonWaitingForMachine, "waiting for Cluster API to set the owner Machine"
	case s.backend == nil:
		reason, msg = noCloud(s.platform)
	case s.m.Spec.Bootstrap.DataSecretName == nil || *s.m.Spec.Bootstrap.DataSecretName == "":
		reason, msg = infrav1.ReasonWaitingForBootstrapData, "waiting for the Machine's bootstrap data Secret (spec.bootstrap.dataSecretName)"
	default:
		return false
	}
	s.setReady(reason, msg)
	p.phases.set(s.lm, s.id.cluster, phasePending)
	return true
}

// lookUp reads a provisioned machine from the local cloud; done with the result to return
// when it is missing there or the cloud failed.
func (p *Provider) lookUp(ctx context.Context, s *machineScope) (st localcloud.MachineStatus, done bool, res crreconcile.Result, err error) {
	st, err = s.backend.Get(ctx, s.id.cluster, s.id.name)
	if errors.Is(err, localcloud.ErrNotFound) {
		s.setReady(infrav1.ReasonNotFound, fmt.Sprintf("the %s has no machine %s/%s", cloudName(s.platform), s.id.cluster, s.id.name))
		s.lm.Status.State = ""
		p.phases.set(s.lm, s.id.cluster, phaseMissing)
		return st, true, crreconcile.Result{RequeueAfter: p.resync}, nil
	}
	if err != nil {
		res, err = p.cloudFailed(s, "get", err)
		return st, true, res, err
	}
	return st, false, crreconcile.Result{}, nil
}

// provision creates the machine in the local cloud from its Machine's bootstrap data and
// records its provider ID and the userdata Secret it booted; done with the result to return
// while the data is not there yet or a step failed.
func (p *Provider) provision(ctx context.Context, s *machineScope) (st localcloud.MachineStatus, done bool, res crreconcile.Result, err error) {
	lm := s.lm
	secret := *s.m.Spec.Bootstrap.DataSecretName
	userData, msg, err := p.userData(ctx, lm.Namespace, secret)
	if err != nil || msg != "" {
		s.setReady(infrav1.ReasonWaitingForBootstrapData, msg)
		p.phases.set(lm, s.id.cluster, phasePending)
		return st, true, crreconcile.Result{RequeueAfter: bootPoll}, err
	}
	providerID := api.ProviderID(s.id.cluster, s.id.name)
	st, err = s.backend.Create(ctx, localcloud.MachineSpec{
		Cluster: s.id.cluster, Name: s.id.name, NodePool: s.id.nodepool, UserData: userData, ProviderID: providerID,
		InstanceType: lm.Spec.InstanceType, Zone: lm.Spec.Zone, CapacityType: lm.Spec.CapacityType,
	})
	if err != nil {
		res, err = p.cloudFailed(s, "create", err)
		return st, true, res, err
	}
	err = p.patchObject(ctx, s, func(lm *infrav1.LocalMachine) {
		lm.Spec.ProviderID = providerID
		setAnnotation(lm, infrav1.AnnotationAppliedUserData, secret)
		setAnnotation(lm, infrav1.AnnotationPlatform, s.platform)
	})
	if err != nil {
		return st, true, crreconcile.Result{}, err
	}
	yes := true
	lm.Status.Initialization.Provisioned = &yes
	lm.Status.Addresses = []clusterv1.MachineAddress{{Type: clusterv1.MachineHostName, Address: s.id.name}}
	p.metrics.provisioning.Observe(time.Since(lm.CreationTimestamp.Time).Seconds())
	s.created = true
	s.log.Info("provisioned the machine", "cloud", cloudName(s.platform), "providerID", providerID, "userdata", secret,
		"instanceType", st.InstanceType, "zone", st.Zone)
	return st, false, crreconcile.Result{}, nil
}

// reconfigureInPlace applies the userdata Secret an in-place upgrade asks for
// (api.AnnotationDesiredUserData) to the running machine, updating *st; waiting while that
// Secret is not ready yet, done with the result to return when a step failed.
func (p *Provider) reconfigureInPlace(ctx context.Context, s *machineScope, st *localcloud.MachineStatus) (waiting, done bool, res crreconcile.Result, err error) {
	lm := s.lm
	desired := s.m.Annotations[api.AnnotationDesiredUserData]
	if desired == "" || desired == lm.Annotations[infrav1.AnnotationAppliedUserData] {
		return false, false, crreconcile.Result{}, nil
	}
	userData, msg, err := p.userData(ctx, lm.Namespace, desired)
	switch {
	case err != nil:
		return false, true, crreconcile.Result{}, err
	case msg != "":
		s.log.Warn("cannot reconfigure the machine in place yet", "userdata", desired, "why", msg)
		return true, false, crreconcile.Result{}, nil
	}
	if *st, err = s.backend.Reconfigure(ctx, s.id.cluster, s.id.name, userData); err != nil {
		res, err = p.cloudFailed(s, "reconfigure", err)
		return false, true, res, err
	}
	if err := p.patchObject(ctx, s, func(lm *infrav1.LocalMachine) { setAnnotation(lm, infrav1.AnnotationAppliedUserData, desired) }); err != nil {
		return false, true, crreconcile.Result{}, err
	}
	s.log.Info("reconfigured the machine in place", "userdata", desired, "desiredConfig", s.m.Annotations[api.AnnotationDesiredConfig])
	return false, false, crreconcile.Result{}, nil
}

// finalizeMachine deletes the cloud machine of a deleting LocalMachine, then releases it.
func (p *Provider) finalizeMachine(ctx context.Context, s *machineScope) (crreconcile.Result, error) {
	nn := types.NamespacedName{Namespace: s.lm.Namespace, Name: s.lm.Name}
	if !controllerutil.ContainsFinalizer(s.lm, infrav1.FinalizerLocalMachine) {
		p.phases.forget(nn)
		return crreconcile.Result{}, nil
	}
	p.phases.set(s.lm, s.id.cluster, phaseDeleting)
	if s.backend == nil {
		reason, msg := noCloud(s.platform)
		s.setReady(reason, strings.Replace(msg, "is not provisioned", "cannot be deleted", 1))
		return crreconcile.Result{}, p.patchStatus(ctx, s)
	}
	if err := s.backend.Delete(ctx, s.id.cluster, s.id.name); err != nil && !errors.Is(err, localcloud.ErrNotFound) {
		res, err := p.cloudFailed(s, "delete", err)
		return res, errors.Join(err, p.patchStatus(ctx, s))
	}
	view := s.view()
	view.Phase = string(clusterv1.MachinePhaseDeleting)
	sent, err := p.outbox.Record(ctx, s.id.cluster, events.ResourceMachine, events.VerbMachineDeleted, s.id.key(), view)
	if err != nil {
		return crreconcile.Result{}, fmt.Errorf("record machine.deleted of %s: %w", s.id.key(), err)
	}
	p.outbox.Send(ctx, sent) // the cloud machine is gone already
	if err := p.patchObject(ctx, s, func(lm *infrav1.LocalMachine) { controllerutil.RemoveFinalizer(lm, infrav1.FinalizerLocalMachine) }); err != nil {
		return crreconcile.Result{}, err
	}
	p.phases.forget(nn)
	s.log.Info("deleted the machine", "cloud", cloudName(s.platform))
	return crreconcile.Result{}, nil
}

// cloudFailed records a failed cloud call on the LocalMachine and returns the error, so the
// controller retries with backoff.
func (p *Provider) cloudFailed(s *machineScope, op string, err error) (crreconcile.Result, error) {
	p.metrics.cloudErrors.WithLabelValues(op).Inc()
	s.setReady(infrav1.ReasonCloudError, fmt.Sprintf("the %s failed to %s the machine: %v", cloudName(s.platform), op, err))
	return crreconcile.Result{}, fmt.Errorf("%s: %s %s: %w", cloudName(s.platform), op, s.id.key(), err)
}

// observe copies the cloud's report into the LocalMachine's status.
func (s *machineScope) observe(st localcloud.MachineStatus) {
	s.cloud = &st
	lm := s.lm
	lm.Status.State = st.State
	if st.State == localcloud.StateRunning && st.NodeName != "" {
		lm.Status.NodeName = st.NodeName // joined; kept from then on
	}
	lm.Status.ConfigHash = st.ConfigHash
	lm.Status.KubeletVersion = st.KubeletVersion
	lm.Status.Fault = st.Fault
	lm.Status.Boots = int32(st.Boots)
	lm.Status.FailureDomain = st.Zone
	status, msg := metav1.ConditionFalse, st.Message
	switch st.State {
	case localcloud.StateRunning:
		status = metav1.ConditionTrue
	case localcloud.StateBooting:
		msg = cmp.Or(msg, "booting: fetching Ignition and joining the cluster")
	case localcloud.StateStopped:
		msg = cmp.Or(msg, "the machine is stopped")
	case localcloud.StateFailed:
		msg = cmp.Or(msg, "the machine failed to boot")
	}
	meta.SetStatusCondition(&lm.Status.Conditions, metav1.Condition{
		Type: infrav1.ConditionReady, Status: status, Reason: cmp.Or(st.State, "Unknown"), Message: msg, ObservedGeneration: lm.Generation,
	})
}

// setReady sets the Ready condition False with reason and message.
func (s *machineScope) setReady(reason, message string) {
	meta.SetStatusCondition(&s.lm.Status.Conditions, metav1.Condition{
		Type: infrav1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: message, ObservedGeneration: s.lm.Generation,
	})
}

// statusChanged reports whether what machine.status announces changed.
func statusChanged(a, b infrav1.LocalMachineStatus) bool {
	return a.State != b.State || a.NodeName != b.NodeName || a.ConfigHash != b.ConfigHash ||
		a.Fault != b.Fault || a.KubeletVersion != b.KubeletVersion
}

// publish records the scope's pending events in the outbox, in order, and sends them: they
// report what the cloud machine did already. It runs before the status that reflects them is
// written; each recorded one is cleared, so a failed record is retried by the next reconcile
// (the status is not written meanwhile).
func (p *Provider) publish(ctx context.Context, s *machineScope) error {
	key, v := s.id.key(), s.view()
	var err error
	var sent [3]outbox.Entry
	if s.created {
		sent[0], err = p.outbox.Record(ctx, s.id.cluster, events.ResourceMachine, events.VerbMachineCreated, key, v)
		s.created = err != nil
	}
	if s.joined && err == nil {
		sent[1], err = p.outbox.Record(ctx, s.id.cluster, events.ResourceMachine, events.VerbMachineJoined, key, v)
		s.joined = err != nil
	}
	if s.changed && err == nil {
		sent[2], err = p.outbox.Record(ctx, s.id.cluster, events.ResourceMachine, events.VerbMachineStatus, key, v)
		s.changed = err != nil
	}
	p.outbox.Send(ctx, sent[:]...)
	if err != nil {
		return fmt.Errorf("record the machine events of %s: %w", key, err)
	}
	return nil
}

// view is the machine as its events carry it.
func (s *machineScope) view() api.Machine {
	v := machineView(s.id.cluster, s.m, s.cloud)
	v.Name = cmp.Or(v.Name, s.id.name)
	v.NodePool = cmp.Or(v.NodePool, s.id.nodepool)
	return v
}

// patchObject applies change to the LocalMachine's metadata or spec and writes it with an
// optimistic lock; on a conflict (the cache was behind) it reads the object afresh and applies
// change again. The in-memory status, written separately, is kept.
func (p *Provider) patchObject(ctx context.Context, s *machineScope, change func(*infrav1.LocalMachine)) error {
	var status infrav1.LocalMachineStatus
	s.lm.Status.DeepCopyInto(&status)
	err := store.RetryOnConflict(apierrors.IsConflict, func() error {
		base := s.lm.DeepCopy()
		change(s.lm)
		err := p.client.Patch(ctx, s.lm, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
		if apierrors.IsConflict(err) {
			if gerr := p.reader.Get(ctx, client.ObjectKeyFromObject(s.lm), s.lm); gerr != nil {
				return gerr
			}
		}
		return err
	})
	status.DeepCopyInto(&s.lm.Status)
	if err != nil {
		return fmt.Errorf("patch LocalMachine %s/%s: %w", s.lm.Namespace, s.lm.Name, err)
	}
	return nil
}

// patchStatus writes the status if it changed.
func (p *Provider) patchStatus(ctx context.Context, s *machineScope) error {
	if equality.Semantic.DeepEqual(s.before, s.lm.Status) {
		return nil
	}
	base := s.lm.DeepCopy()
	s.before.DeepCopyInto(&base.Status)
	if err := p.client.Status().Patch(ctx, s.lm, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("patch LocalMachine %s/%s status: %w", s.lm.Namespace, s.lm.Name, err)
	}
	s.lm.Status.DeepCopyInto(&s.before)
	return nil
}

// userData reads a bootstrap data Secret's "value". A Secret that is missing or has no value
// is a message (the caller waits), not an error.
func (p *Provider) userData(ctx context.Context, namespace, name string) (data []byte, msg string, err error) {
	var sec corev1.Secret
	err = p.reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &sec)
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Sprintf("the bootstrap data Secret %s does not exist yet", name), nil
	case err != nil:
		return nil, "", fmt.Errorf("read Secret %s/%s: %w", namespace, name, err)
	case len(sec.Data["value"]) == 0:
		return nil, fmt.Sprintf("the bootstrap data Secret %s has no \"value\"", name), nil
	}
	return sec.Data["value"], "", nil
}

// ownerMachine returns the Cluster API Machine that owns lm, or nil when none does (yet).
func (p *Provider) ownerMachine(ctx context.Context, lm *infrav1.LocalMachine) (*clusterv1.Machine, error) {
	name := ownerMachineName(lm)
	if name == "" {
		return nil, nil
	}
	m := &clusterv1.Machine{}
	err := p.client.Get(ctx, types.NamespacedName{Namespace: lm.Namespace, Name: name}, m)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get Machine %s/%s: %w", lm.Namespace, name, err)
	}
	return m, nil
}

// ownerMachineName is the name of lm's Machine owner reference, or "".
func ownerMachineName(lm *infrav1.LocalMachine) string {
	for _, ref := range lm.OwnerReferences {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err == nil && gv.Group == clusterv1.GroupVersion.Group && ref.Kind == "Machine" {
			return ref.Name
		}
	}
	return ""
}

// identify names lm's cloud machine: from its providerID once set, else from its Machine
// (Cluster = label cluster.x-k8s.io/cluster-name, Name = the Machine's name), else from its
// owner reference, labels and namespace.
func identify(lm *infrav1.LocalMachine, m *clusterv1.Machine) machineID {
	var id machineID
	if rest, ok := strings.CutPrefix(lm.Spec.ProviderID, "local://"); ok {
		id.cluster, id.name, _ = strings.Cut(rest, "/")
	}
	if m != nil {
		id.name = cmp.Or(id.name, m.Name)
		id.cluster = cmp.Or(id.cluster, m.Labels[clusterv1.ClusterNameLabel], m.Spec.ClusterName)
		id.nodepool = m.Labels[api.LabelNodePool]
	}
	id.name = cmp.Or(id.name, ownerMachineName(lm), lm.Name)
	id.cluster = cmp.Or(id.cluster, lm.Labels[clusterv1.ClusterNameLabel], strings.TrimPrefix(lm.Namespace, api.ControlPlaneNamespacePrefix))
	id.nodepool = cmp.Or(id.nodepool, lm.Labels[api.LabelNodePool])
	return id
}

func provisioned(lm *infrav1.LocalMachine) bool {
	return lm.Status.Initialization.Provisioned != nil && *lm.Status.Initialization.Provisioned
}

func setAnnotation(o metav1.Object, key, value string) {
	a := o.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[key] = value
	o.SetAnnotations(a)
}

// machineView is the api.Machine of a Cluster API Machine (nil: unknown) joined with what the
// local cloud reports of it (nil: nothing).
func machineView(cluster string, m *clusterv1.Machine, st *localcloud.MachineStatus) api.Machine {
	v := api.Machine{Cluster: cluster}
	if m != nil {
		v.Name = m.Name
		v.NodePool = m.Labels[api.LabelNodePool]
		v.Phase = m.Status.Phase
		v.NodeName = m.Status.NodeRef.Name
		v.ProviderID = m.Spec.ProviderID
		v.Version = m.Spec.Version
		v.InstanceType = m.Labels[api.LabelMachineInstanceType]
		v.NodeClaim = m.Annotations[api.AnnotationNodeClaim]
		v.CreatedAt = m.CreationTimestamp.UTC()
	}
	if st != nil {
		v.Name = cmp.Or(v.Name, st.Name)
		v.NodePool = cmp.Or(v.NodePool, st.NodePool)
		v.NodeName = cmp.Or(v.NodeName, st.NodeName)
		v.ProviderID = cmp.Or(v.ProviderID, st.ProviderID)
		v.Version = cmp.Or(v.Version, st.KubeletVersion)
		v.InstanceType = cmp.Or(st.InstanceType, v.InstanceType)
		v.Zone = st.Zone
		v.CapacityType = st.CapacityType
		v.ConfigHash = st.ConfigHash
		v.Fault = st.Fault
		v.Message = st.Message
		if v.CreatedAt.IsZero() {
			v.CreatedAt = st.CreatedAt.UTC()
		}
	}
	return v
}

// cloudName names platform's cloud in messages.
func cloudName(platform string) string {
	if platform == api.PlatformDocker {
		return "Docker engine"
	}
	return "local cloud"
}
