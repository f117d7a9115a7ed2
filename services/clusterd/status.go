package clusterd

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/release"
)

// Condition reasons clusterd sets.
const (
	ReasonAsExpected               = "AsExpected"
	ReasonInvalidConfiguration     = "InvalidConfiguration"
	ReasonWaitingForInfrastructure = "WaitingForInfrastructure"
	ReasonWaitingForPKI            = "WaitingForPKI"
	ReasonWaitingForComponent      = "WaitingForComponent"
	ReasonComponentUnavailable     = "ComponentUnavailable"
	ReasonProvisioning             = "Provisioning"
	ReasonUpgrading                = "UpgradingVersion"
	ReasonRollingOut               = "RollingOut"
	ReasonComponentDegraded        = "ComponentDegraded"
	ReasonWaitingForIgnition       = "WaitingForIgnitionServer"
	ReasonDeletionRequested        = "DeletionRequested"
	ReasonWaitingForCleanup        = "WaitingForCleanup"
)

// Version history states (HyperShift's).
const (
	UpdatePartial   = api.UpdateStatePartial
	UpdateCompleted = api.UpdateStateCompleted
)

// maxHistory bounds status.version.history.
const maxHistory = 10

// components are the control-plane components a cluster needs, in dependency order.
var components = []string{api.ComponentEtcd, api.ComponentKubeAPIServer, api.ComponentControllerManager, api.ComponentScheduler}

// observed is what the other daemons report about one cluster.
type observed struct {
	infra      *api.Infra
	pki        *api.ClusterPKI
	components map[string]*api.ControlPlaneComponent // by component name ("etcd")
	// componentKeys are every controlplane key of the cluster, the four above and any other.
	componentKeys []string
	// nodePools are the cluster's "nodepools" keys ("<cluster>.<pool>"), ignitionKeys its
	// "ignition" keys (the server record "<cluster>" and the pools' token records).
	nodePools, ignitionKeys []string
	// nodePoolWaits is what each deleting pool waits for, by key (its Ready message).
	nodePoolWaits map[string]string
	// ignition is ignitiond's server record of the cluster.
	ignition *api.IgnitionServer
	// management is what the deletion of the cluster's Cluster API objects waits for.
	management string
	// notSupported, when not empty, says why the runtime cannot hibernate the cluster.
	notSupported string
}

// empty reports whether no daemon holds anything for the cluster any more.
func (o observed) empty() bool {
	return o.infra == nil && o.pki == nil && len(o.componentKeys) == 0 &&
		len(o.nodePools) == 0 && len(o.ignitionKeys) == 0 && o.management == ""
}

// statusChange says what computeStatus changed, for events and metrics.
type statusChange struct {
	conditions     bool // a condition's status, reason or message changed
	firstAvailable bool // Available became True for the first time in the cluster's life
}

// computeStatus sets c's status from what the other daemons report. It is pure: the same
// inputs give the same status, and times move only when something transitions. Each
// condition has its own setter, in the order they depend on each other.
func computeStatus(c *api.Cluster, o observed, now time.Time) statusChange {
	s := &statusScope{c: c, st: &c.Status, o: o, now: now}
	wasAvailable := s.st.Conditions.IsTrue(api.ConditionAvailable)
	everCompleted := s.st.Version != nil && slices.ContainsFunc(s.st.Version.History, func(h api.UpdateHistory) bool { return h.State == UpdateCompleted })

	s.setValidConfiguration()
	s.setInfrastructureReady()
	pkiReady := s.setPKIReady()
	s.setComponentAvailable(api.ConditionEtcdAvailable, api.ComponentEtcd)
	s.setComponentAvailable(api.ConditionKubeAPIServerAvailable, api.ComponentKubeAPIServer)
	if s.setAvailable(pkiReady) {
		s.ch.firstAvailable = !wasAvailable && !everCompleted
	}
	s.setProgressing(everCompleted)
	s.setDegraded()
	s.setIgnitionEndpointAvailable()
	s.setHibernated()
	if c.DeletionTimestamp != nil {
		s.set(api.ConditionDeleting, api.ConditionTrue, ReasonWaitingForCleanup, deletionMessage(o))
	}
	s.st.ObservedGeneration = c.Generation
	return s.ch
}

// statusScope is one computeStatus run: the cluster, what the other daemons report, and what
// changed.
type statusScope struct {
	c   *api.Cluster
	st  *api.ClusterStatus
	o   observed
	now time.Time
	ch  statusChange
}

// set sets a condition at the cluster's generation and notes whether it changed.
func (s *statusScope) set(typ string, status api.ConditionStatus, reason, msg string) {
	if s.st.Conditions.Set(api.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: s.c.Generation}, s.now) {
		s.ch.conditions = true
	}
}

// storedCatalogue is what a stored spec is checked against: today's releases and schedule
// parser; the operator's minimum backup interval counts when a spec is written, so lowering
// or raising it never turns stored clusters invalid.
var storedCatalogue = catalogue(0)

// setValidConfiguration checks the stored spec against today's release catalogue.
func (s *statusScope) setValidConfiguration() {
	if err := api.ValidateClusterSpec(&s.c.Spec, storedCatalogue); err != nil {
		s.set(api.ConditionValidConfiguration, api.ConditionFalse, ReasonInvalidConfiguration, fieldMessage(err))
		return
	}
	s.set(api.ConditionValidConfiguration, api.ConditionTrue, ReasonAsExpected, "the configuration is valid")
}

// setInfrastructureReady sets InfrastructureReady and the endpoint.
func (s *statusScope) setInfrastructureReady() {
	st, o := s.st, s.o
	switch {
	case o.infra == nil:
		s.set(api.ConditionInfrastructureReady, api.ConditionFalse, ReasonWaitingForInfrastructure,
			"waiting for infrad to allocate the control-plane endpoint and ports")
		st.ControlPlaneEndpoint = nil
	case !o.infra.Ready:
		msg := "waiting for infrad to finish provisioning the infrastructure"
		if o.infra.Message != "" {
			msg += ": " + o.infra.Message
		}
		s.set(api.ConditionInfrastructureReady, api.ConditionFalse, ReasonWaitingForInfrastructure, msg)
		st.ControlPlaneEndpoint = nil
	default:
		ep := o.infra.Endpoint
		st.ControlPlaneEndpoint = &ep
		s.set(api.ConditionInfrastructureReady, api.ConditionTrue, ReasonAsExpected,
			fmt.Sprintf("the control-plane endpoint is %s", hostPort(ep)))
	}
}

// setPKIReady sets PKIReady and whether the admin kubeconfig can be handed out, and reports
// whether the certificates are issued.
func (s *statusScope) setPKIReady() bool {
	st, o, c := s.st, s.o, s.c
	pkiReady := o.pki != nil && o.pki.Ready
	switch {
	case pkiReady:
		s.set(api.ConditionPKIReady, api.ConditionTrue, ReasonAsExpected, "certificates and kubeconfigs are issued")
	case o.infra == nil || !o.infra.Ready:
		s.set(api.ConditionPKIReady, api.ConditionFalse, ReasonWaitingForInfrastructure,
			"pkid issues the certificates once the infrastructure is ready")
	default:
		s.set(api.ConditionPKIReady, api.ConditionFalse, ReasonWaitingForPKI,
			"waiting for pkid to issue the certificates and kubeconfigs")
	}
	st.KubeconfigAvailable = pkiReady && len(o.pki.Kubeconfigs[api.KubeconfigAdmin]) > 0 && c.DeletionTimestamp == nil
	return pkiReady
}

// setComponentAvailable sets a condition that mirrors one component's availability.
func (s *statusScope) setComponentAvailable(typ, name string) {
	o := s.o
	comp := o.components[name]
	switch {
	case comp == nil:
		s.set(typ, api.ConditionFalse, ReasonWaitingForComponent, waitingFor(name, nil, o))
	case componentAvailable(comp):
		s.set(typ, api.ConditionTrue, ReasonAsExpected, fmt.Sprintf("%d/%d replicas ready", comp.Status.ReadyReplicas, comp.Spec.Replicas))
	default:
		reason := ReasonComponentUnavailable
		if cond, ok := comp.Status.Conditions.Get(api.ConditionAvailable); ok && cond.Reason != "" {
			reason = cond.Reason
		}
		s.set(typ, api.ConditionFalse, reason, waitingFor(name, comp, o))
	}
}

// setAvailable sets Available: every component is. It reports whether the cluster is.
func (s *statusScope) setAvailable(pkiReady bool) bool {
	st, o := s.st, s.o
	if s.c.Spec.Hibernating() && o.notSupported == "" {
		why := api.HibernationReasonRequested
		if h := st.Hibernation; h != nil && h.Reason != "" {
			why = h.Reason
		}
		s.set(api.ConditionAvailable, api.ConditionFalse, api.ReasonHibernated,
			"the cluster hibernates ("+why+"); a connection to its endpoint or spec.hibernation.enabled=false wakes it")
		return false
	}
	for _, name := range components {
		if comp := o.components[name]; comp == nil || !componentAvailable(comp) {
			reason := ReasonWaitingForComponent
			switch {
			case o.infra == nil || !o.infra.Ready:
				reason = ReasonWaitingForInfrastructure
			case !pkiReady:
				reason = ReasonWaitingForPKI
			case comp != nil:
				reason = ReasonComponentUnavailable
			}
			s.set(api.ConditionAvailable, api.ConditionFalse, reason, waitingFor(name, comp, o))
			return false
		}
	}
	msg := "the control plane is available"
	if st.ControlPlaneEndpoint != nil {
		msg += " at " + hostPort(*st.ControlPlaneEndpoint)
	}
	s.set(api.ConditionAvailable, api.ConditionTrue, ReasonAsExpected, msg)
	return true
}

// setProgressing sets Progressing and keeps the version history.
func (s *statusScope) setProgressing(everCompleted bool) {
	st, o, c := s.st, s.o, s.c
	desired := c.Spec.Release.Version
	var pending []string
	for _, name := range components {
		if p := rolloutPending(name, o.components[name], desired); p != "" {
			pending = append(pending, p)
		}
	}
	complete := len(pending) == 0
	updateVersion(st, desired, complete, s.now)
	if complete {
		s.set(api.ConditionProgressing, api.ConditionFalse, ReasonAsExpected, "the control plane runs "+desired)
	} else {
		reason := ReasonRollingOut
		switch {
		case !everCompleted:
			reason = ReasonProvisioning
		case len(st.Version.History) > 1 && st.Version.History[0].State == UpdatePartial:
			reason = ReasonUpgrading
		}
		s.set(api.ConditionProgressing, api.ConditionTrue, reason, "rolling out "+desired+": "+strings.Join(pending, "; "))
	}
}

// setDegraded sets Degraded: any component says so.
func (s *statusScope) setDegraded() {
	o := s.o
	var degraded []string
	for _, name := range components {
		comp := o.components[name]
		if comp == nil {
			continue
		}
		if cond, ok := comp.Status.Conditions.Get(api.ConditionDegraded); ok && cond.Status == api.ConditionTrue {
			degraded = append(degraded, withDetail(name+" is degraded", cond.Message))
		}
	}
	if len(degraded) > 0 {
		s.set(api.ConditionDegraded, api.ConditionTrue, ReasonComponentDegraded, strings.Join(degraded, "; "))
	} else {
		s.set(api.ConditionDegraded, api.ConditionFalse, ReasonAsExpected, "no component is degraded")
	}
}

// setIgnitionEndpointAvailable mirrors ignitiond's server. Available does not depend on it
// (a cluster without node pools is available).
func (s *statusScope) setIgnitionEndpointAvailable() {
	st := s.st
	switch ign := s.o.ignition; {
	case ign == nil:
		s.set(api.ConditionIgnitionEndpointAvailable, api.ConditionFalse, ReasonWaitingForIgnition,
			"waiting for ignitiond to serve the cluster's ignition endpoint")
		st.IgnitionEndpoint = ""
	case !ign.Ready:
		s.set(api.ConditionIgnitionEndpointAvailable, api.ConditionFalse, ReasonWaitingForIgnition,
			withDetail("waiting for ignitiond to serve the ignition endpoint", ign.Message))
		st.IgnitionEndpoint = ""
	default:
		s.set(api.ConditionIgnitionEndpointAvailable, api.ConditionTrue, ReasonAsExpected,
			"machines fetch their ignition from https://"+ign.Endpoint)
		st.IgnitionEndpoint = ign.Endpoint
	}
}

// componentAvailable reports whether the component's Available condition is True.
func componentAvailable(comp *api.ControlPlaneComponent) bool {
	return comp.Status.Conditions.IsTrue(api.ConditionAvailable)
}

// waitingFor says what the cluster waits for before name is available.
func waitingFor(name string, comp *api.ControlPlaneComponent, o observed) string {
	if comp == nil {
		switch {
		case o.infra == nil || !o.infra.Ready:
			return fmt.Sprintf("waiting for %s: componentd starts it once infrad has allocated the infrastructure", name)
		case o.pki == nil || !o.pki.Ready:
			return fmt.Sprintf("waiting for %s: componentd starts it once pkid has issued the certificates", name)
		}
		return fmt.Sprintf("waiting for componentd to start %s", name)
	}
	msg := fmt.Sprintf("waiting for %s: %d/%d replicas ready", name, comp.Status.ReadyReplicas, comp.Spec.Replicas)
	if cond, ok := comp.Status.Conditions.Get(api.ConditionAvailable); ok {
		msg = withDetail(msg, cond.Message)
	}
	return msg
}

// rolloutPending says why name has not finished rolling out desired, or "" when it has: it
// exists, its generation is observed, it runs the desired version and RolloutComplete is True.
func rolloutPending(name string, comp *api.ControlPlaneComponent, desired string) string {
	switch {
	case comp == nil:
		return name + " is not created yet"
	case comp.Status.ObservedGeneration < comp.Generation:
		return fmt.Sprintf("%s has not observed generation %d yet", name, comp.Generation)
	case !atVersion(name, comp.Status.Version, desired):
		have := comp.Status.Version
		if have == "" {
			have = "no version"
		}
		return fmt.Sprintf("%s runs %s", name, have)
	}
	cond, ok := comp.Status.Conditions.Get(api.ConditionRolloutComplete)
	if !ok || cond.Status != api.ConditionTrue {
		return withDetail(fmt.Sprintf("%s is rolling out (%d/%d replicas ready)", name, comp.Status.ReadyReplicas, comp.Spec.Replicas), cond.Message)
	}
	return ""
}

// atVersion reports whether a component reporting version runs the desired release. etcd may
// report either the Kubernetes release or the etcd version that release runs.
func atVersion(name, version, desired string) bool {
	v := strings.TrimPrefix(version, "v")
	if v == "" {
		return false
	}
	if v == strings.TrimPrefix(desired, "v") {
		return true
	}
	if name == api.ComponentEtcd {
		if r, err := release.Lookup(desired); err == nil && v == r.EtcdVersion {
			return true
		}
	}
	return false
}

// updateVersion keeps status.version: a new desired version starts a Partial entry; the entry
// is Completed once every component runs it.
func updateVersion(st *api.ClusterStatus, desired string, complete bool, now time.Time) {
	if st.Version == nil {
		st.Version = &api.VersionStatus{}
	}
	st.Version.Desired = api.Release{Version: desired}
	h := st.Version.History
	if len(h) == 0 || h[0].Version != desired {
		if len(h) > 0 && h[0].CompletionTime == nil {
			t := now // superseded before it completed: it stays Partial
			h[0].CompletionTime = &t
		}
		h = append([]api.UpdateHistory{{Version: desired, State: UpdatePartial, StartedTime: now}}, h...)
		if len(h) > maxHistory {
			h = h[:maxHistory]
		}
	}
	if h[0].State == UpdatePartial && h[0].CompletionTime == nil && complete {
		t := now
		h[0].State = UpdateCompleted
		h[0].CompletionTime = &t
	}
	st.Version.History = h
}

// deletionMessage says what a deleting cluster waits for.
func deletionMessage(o observed) string {
	var waits []string
	if n := len(o.nodePools); n > 0 {
		pools := names(o.nodePools)
		for i, k := range sortedKeys(o.nodePools) {
			if w := o.nodePoolWaits[k]; w != "" {
				pools[i] += ": " + w
			}
		}
		waits = append(waits, fmt.Sprintf("waiting for %d %s to be deleted (%s)", n, plural(n, "node pool", "node pools"),
			strings.Join(pools, ", ")))
	}
	if n := len(o.ignitionKeys); n > 0 {
		waits = append(waits, fmt.Sprintf("waiting for ignitiond to remove %d ignition %s", n, plural(n, "record", "records")))
	}
	if o.management != "" {
		waits = append(waits, o.management)
	}
	if n := len(o.componentKeys); n > 0 {
		waits = append(waits, fmt.Sprintf("waiting for componentd to stop %d %s (%s)", n, plural(n, "component", "components"),
			strings.Join(names(o.componentKeys), ", ")))
	}
	if o.infra != nil {
		waits = append(waits, "waiting for infrad to release the infrastructure")
	}
	if o.pki != nil {
		waits = append(waits, "waiting for pkid to remove the certificates")
	}
	if len(waits) == 0 {
		return "everything is released; removing the cluster"
	}
	return strings.Join(waits, "; ")
}

// names are the second tokens of "<cluster>.<name>" keys, sorted.
func names(keys []string) []string {
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		_, name, _ := api.SplitPartKey(k)
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// sortedKeys are keys sorted by their second token, in the order names returns them.
func sortedKeys(keys []string) []string {
	out := slices.Clone(keys)
	slices.SortFunc(out, func(a, b string) int {
		_, x, _ := api.SplitPartKey(a)
		_, y, _ := api.SplitPartKey(b)
		return strings.Compare(x, y)
	})
	return out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func withDetail(msg, detail string) string {
	if detail == "" {
		return msg
	}
	return msg + ": " + detail
}

func hostPort(ep api.Endpoint) string {
	return fmt.Sprintf("%s:%d", ep.Host, ep.Port)
}

// fieldMessage renders a validation error as one line: "field: detail; field: detail".
func fieldMessage(err error) string {
	var ae *api.Error
	if !errors.As(err, &ae) || len(ae.Fields) == 0 {
		return err.Error()
	}
	parts := make([]string, 0, len(ae.Fields))
	for _, f := range ae.Fields {
		parts = append(parts, f.Field+": "+f.Detail)
	}
	return strings.Join(parts, "; ")
}
