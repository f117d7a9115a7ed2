package api

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// MaxNodePoolNameLength bounds NodePool names so that the names derived from them stay DNS
// labels: the userdata Secret "<nodepool>-userdata-<hash8>" (18 more characters) and Cluster
// API's MachineSet "<nodepool>-<5>" and Machine "<nodepool>-<5>-<5>" names.
const MaxNodePoolNameLength = 63 - len("-userdata-") - 8

// MaxKubeletSkew is how many minor releases a pool's kubelets may trail the control plane
// (Kubernetes' version skew policy); a pool may never be newer than the control plane.
const MaxKubeletSkew = 3

// MaxNodePoolSize bounds a pool's spec.replicas and spec.autoScaling.max; nodepoold's
// machine quotas (per cluster, in all) bound the sum of its pools' sizes.
const MaxNodePoolSize = 1000

// Defaults of a NodePool's management.
const (
	DefaultMaxSurge              int32 = 1
	DefaultMaxUnavailable        int32 = 0
	DefaultInPlaceMaxUnavailable int32 = 1
)

// ReservedLabelPrefix starts the node labels hostplane sets itself (LabelNodePool, ...); a
// pool's nodeLabels may not use it.
const ReservedLabelPrefix = "hostplane.dev/"

// Taint effects.
const (
	TaintEffectNoSchedule       = "NoSchedule"
	TaintEffectPreferNoSchedule = "PreferNoSchedule"
	TaintEffectNoExecute        = "NoExecute"
)

// NodePoolChecks are the questions validating a pool asks outside pkg/api.
type NodePoolChecks struct {
	// Releases answers whether a version is in the catalogue (Known; CheckUpgrade is unused).
	Releases ReleaseCatalogue
	// Config checks one config document's content (an Ignition v3 config or a MachineConfig);
	// nil accepts every non-empty content. Its error message is shown to the caller.
	Config func(doc ConfigDocument) error
}

// Default fills the fields a user may leave out: the cluster's platform (on platform local,
// the instance type DefaultInstanceType), and the rollout
// bounds of the pool's upgrade type (Replace: RollingUpdate with maxSurge 1 and
// maxUnavailable 0; InPlace: maxUnavailable 1). A leading "v" of the release is dropped.
// Replicas stay unset: an unset size without autoScaling means 0.
func (s *NodePoolSpec) Default(cluster *ClusterSpec) {
	s.Release.Version = strings.TrimPrefix(strings.TrimSpace(s.Release.Version), "v")
	if s.Platform.Type == "" && cluster != nil {
		s.Platform.Type = cluster.Platform.Type
	}
	if ProvidesMachines(s.Platform.Type) && (s.Platform.Local == nil || s.Platform.Local.InstanceType == "") {
		s.Platform.Local = &LocalNodePoolPlatform{InstanceType: DefaultInstanceType}
	}
	m := &s.Management
	switch m.UpgradeType {
	case UpgradeTypeReplace:
		if m.Replace == nil {
			m.Replace = &ReplaceUpgrade{}
		}
		if m.Replace.Strategy == "" {
			m.Replace.Strategy = ReplaceStrategyRollingUpdate
		}
		if m.Replace.Strategy == ReplaceStrategyRollingUpdate {
			if m.Replace.RollingUpdate == nil {
				m.Replace.RollingUpdate = &RollingUpdate{}
			}
			ru := m.Replace.RollingUpdate
			if ru.MaxSurge == nil {
				v := DefaultMaxSurge
				ru.MaxSurge = &v
			}
			if ru.MaxUnavailable == nil {
				v := DefaultMaxUnavailable
				ru.MaxUnavailable = &v
			}
		}
	case UpgradeTypeInPlace:
		if m.InPlace == nil {
			m.InPlace = &InPlaceUpgrade{}
		}
		if m.InPlace.MaxUnavailable == nil {
			v := DefaultInPlaceMaxUnavailable
			m.InPlace.MaxUnavailable = &v
		}
	}
}

// MaxSize is the most machines the pool asks for: its fixed size, or for an autoscaled pool
// its maximum (what the machine quotas count).
func (s *NodePoolSpec) MaxSize() int32 {
	if s.AutoScaling != nil {
		return s.AutoScaling.Max
	}
	return s.DesiredReplicas()
}

// DesiredReplicas is the pool's fixed size, or for an autoscaled pool its minimum.
func (s *NodePoolSpec) DesiredReplicas() int32 {
	switch {
	case s.Replicas != nil:
		return *s.Replicas
	case s.AutoScaling != nil:
		return s.AutoScaling.Min
	}
	return 0
}

// ValidateNodePoolName reports whether name can name a NodePool: a DNS label of at most
// MaxNodePoolNameLength characters.
func ValidateNodePoolName(name string) error {
	switch {
	case name == "":
		return errors.New("is required")
	case len(name) > MaxNodePoolNameLength:
		return fmt.Errorf("must be at most %d characters (it is %d), so <nodepool>-userdata-<hash8> stays a valid DNS label",
			MaxNodePoolNameLength, len(name))
	case len(validation.IsDNS1123Label(name)) > 0:
		return fmt.Errorf("%q must be a DNS label: lower-case letters, digits and '-', starting and ending with a letter or digit", name)
	}
	return nil
}

// ValidateNodePool checks a new pool (defaults already applied) of cluster and returns an
// Invalid error naming every bad field, or nil. The cluster's existence and deletion are the
// caller's to check (they are not field errors).
func ValidateNodePool(np *NodePool, cluster *Cluster, checks NodePoolChecks) error {
	var fe FieldErrors
	if err := ValidateNodePoolName(np.Name); err != nil {
		fe.Add("name", "%s", err)
	} else if np.Name == AutoNodePoolName {
		fe.Add("name", "%q is reserved: it is the pool of the machines Karpenter launches when spec.autoNode is on", np.Name)
	}
	validateNodePoolSpec(&fe, &np.Spec, cluster, checks, true)
	return fe.Err()
}

// ValidateNodePoolUpdate checks a change of a pool's spec from old to updated (defaults applied
// to both): updated must be valid and the immutable fields (upgradeType, platform type, and
// for an InPlace pool the instance type) unchanged.
// The release is checked against the cluster's only when it changed, so a pool left behind by
// a control-plane upgrade can still be scaled.
func ValidateNodePoolUpdate(old, updated *NodePoolSpec, cluster *Cluster, checks NodePoolChecks) error {
	var fe FieldErrors
	validateNodePoolSpec(&fe, updated, cluster, checks, updated.Release.Version != old.Release.Version)
	if updated.Management.UpgradeType != old.Management.UpgradeType {
		// The settings of the other type are beside the point: the type cannot change.
		fe = slices.DeleteFunc(fe, func(f FieldError) bool {
			return f.Field == "spec.management.replace" || f.Field == "spec.management.inPlace"
		})
		setField(&fe, "spec.management.upgradeType", fmt.Sprintf("is immutable (it is %q): create a new node pool to change it", old.Management.UpgradeType))
	}
	if updated.Platform.Type != old.Platform.Type {
		setField(&fe, "spec.platform.type", fmt.Sprintf("is immutable (it is %q)", old.Platform.Type))
	} else if updated.Management.UpgradeType == UpgradeTypeInPlace && updated.Platform.InstanceType() != old.Platform.InstanceType() {
		setField(&fe, "spec.platform.local.instanceType", fmt.Sprintf("is immutable for upgradeType %s (it is %q): machines updated in place keep their shape; create a new node pool to change it",
			UpgradeTypeInPlace, old.Platform.InstanceType()))
	}
	return fe.Err()
}

// CheckNodePoolRelease reports whether machines at release pool may join a control plane at
// release cluster: not newer, and at most MaxKubeletSkew minor releases older.
func CheckNodePoolRelease(cluster, pool string) error {
	cv, err := ParseVersion(cluster)
	if err != nil {
		return fmt.Errorf("the cluster's release %q is not a version", cluster)
	}
	pv, err := ParseVersion(pool)
	if err != nil {
		return fmt.Errorf("%q is not a version such as 1.34.4", pool)
	}
	switch {
	case pv.GreaterThan(cv):
		return fmt.Errorf("%s is newer than the cluster's control plane %s: upgrade the cluster first", pool, cluster)
	case pv.Major() != cv.Major() || cv.Minor()-pv.Minor() > MaxKubeletSkew:
		return fmt.Errorf("%s is more than %d minor releases older than the cluster's control plane %s (kubelet version skew)",
			pool, MaxKubeletSkew, cluster)
	}
	return nil
}

func validateNodePoolSpec(fe *FieldErrors, s *NodePoolSpec, cluster *Cluster, checks NodePoolChecks, checkSkew bool) {
	validateNodePoolSize(fe, s)
	validateNodePoolRelease(fe, s, cluster, checks, checkSkew)
	switch {
	case !slices.Contains(Platforms, s.Platform.Type):
		fe.Add("spec.platform.type", "%q is not a platform; use %s", s.Platform.Type, platformList())
	case cluster != nil && s.Platform.Type != cluster.Spec.Platform.Type:
		fe.Add("spec.platform.type", "%q differs from the cluster's platform %q: a pool's machines run on its cluster's platform",
			s.Platform.Type, cluster.Spec.Platform.Type)
	}
	validateLocalPlatform(fe, &s.Platform)
	validateManagement(fe, &s.Management)
	validateLabels(fe, s.NodeLabels)
	validateTaints(fe, s.Taints)
	validateConfig(fe, s.Config, checks.Config)
	validateTimeout(fe, "spec.nodeDrainTimeout", s.NodeDrainTimeout, 0, MaxNodeTimeout)
	validateTimeout(fe, "spec.nodeVolumeDetachTimeout", s.NodeVolumeDetachTimeout, 0, MaxNodeTimeout)
}

func validateLocalPlatform(fe *FieldErrors, p *NodePoolPlatform) {
	if p.Local == nil {
		return
	}
	if !ProvidesMachines(p.Type) {
		if !slices.ContainsFunc(*fe, func(f FieldError) bool { return f.Field == "spec.platform.type" }) {
			fe.Add("spec.platform.local", "applies only to platforms %q and %q", PlatformLocal, PlatformDocker)
		}
		return
	}
	if _, ok := LocalInstanceType(p.Local.InstanceType); !ok {
		fe.Add("spec.platform.local.instanceType", "%q is not an instance type of the local platform; use one of %s",
			p.Local.InstanceType, LocalInstanceTypeNames())
	}
}

func validateNodePoolSize(fe *FieldErrors, s *NodePoolSpec) {
	if s.Replicas != nil && s.AutoScaling != nil {
		fe.Add("spec.replicas", "cannot be set together with spec.autoScaling; send \"replicas\": null to autoscale")
		fe.Add("spec.autoScaling", "cannot be set together with spec.replicas; send \"autoScaling\": null for a fixed size")
		return
	}
	switch {
	case s.Replicas != nil && *s.Replicas < 0:
		fe.Add("spec.replicas", "%d must not be negative", *s.Replicas)
	case s.Replicas != nil && *s.Replicas > MaxNodePoolSize:
		fe.Add("spec.replicas", "%d is more than the %d machines a pool may have", *s.Replicas, MaxNodePoolSize)
	}
	if a := s.AutoScaling; a != nil {
		if s.Management.UpgradeType == UpgradeTypeInPlace {
			// The autoscaler sizes a pool through its MachineDeployment; an InPlace pool has a
			// MachineSet (docs/autoscaling.md).
			fe.Add("spec.autoScaling", "is not supported with upgradeType %q yet; use %q, or a fixed spec.replicas", UpgradeTypeInPlace, UpgradeTypeReplace)
		}
		if a.Min < 0 {
			fe.Add("spec.autoScaling.min", "%d must not be negative", a.Min)
		}
		switch {
		case a.Max < 1:
			fe.Add("spec.autoScaling.max", "%d must be at least 1", a.Max)
		case a.Max < a.Min:
			fe.Add("spec.autoScaling.max", "%d must not be less than min %d", a.Max, a.Min)
		case a.Max > MaxNodePoolSize:
			fe.Add("spec.autoScaling.max", "%d is more than the %d machines a pool may have", a.Max, MaxNodePoolSize)
		}
	}
}

func validateNodePoolRelease(fe *FieldErrors, s *NodePoolSpec, cluster *Cluster, checks NodePoolChecks, checkSkew bool) {
	const field = "spec.release.version"
	v := s.Release.Version
	if v == "" {
		fe.Add(field, "is required")
		return
	}
	if checks.Releases.Known != nil {
		if err := checks.Releases.Known(v); err != nil {
			fe.Add(field, "%s", message(err))
			return
		}
	}
	if _, err := ParseVersion(v); err != nil {
		fe.Add(field, "%q is not a version such as 1.34.4", v)
		return
	}
	if checkSkew && cluster != nil {
		if err := CheckNodePoolRelease(cluster.Spec.Release.Version, v); err != nil {
			fe.Add(field, "%s", err)
		}
	}
}

func validateManagement(fe *FieldErrors, m *NodePoolManagement) {
	switch m.UpgradeType {
	case "":
		fe.Add("spec.management.upgradeType", "is required: %q or %q (it cannot change later)", UpgradeTypeReplace, UpgradeTypeInPlace)
	case UpgradeTypeReplace:
		if m.InPlace != nil {
			fe.Add("spec.management.inPlace", "applies only to upgradeType %q", UpgradeTypeInPlace)
		}
	case UpgradeTypeInPlace:
		if m.Replace != nil {
			fe.Add("spec.management.replace", "applies only to upgradeType %q", UpgradeTypeReplace)
		}
	default:
		fe.Add("spec.management.upgradeType", "%q is not an upgrade type; use %q or %q", m.UpgradeType, UpgradeTypeReplace, UpgradeTypeInPlace)
	}
	if r := m.Replace; r != nil && m.UpgradeType != UpgradeTypeInPlace {
		switch r.Strategy {
		case ReplaceStrategyRollingUpdate, "":
			if ru := r.RollingUpdate; ru != nil {
				validateRollingUpdate(fe, ru)
			}
		case ReplaceStrategyOnDelete:
			if r.RollingUpdate != nil {
				fe.Add("spec.management.replace.rollingUpdate", "applies only to strategy %q", ReplaceStrategyRollingUpdate)
			}
		default:
			fe.Add("spec.management.replace.strategy", "%q is not a strategy; use %q or %q", r.Strategy, ReplaceStrategyRollingUpdate, ReplaceStrategyOnDelete)
		}
	}
	if ip := m.InPlace; ip != nil && m.UpgradeType != UpgradeTypeReplace && ip.MaxUnavailable != nil && *ip.MaxUnavailable < 1 {
		fe.Add("spec.management.inPlace.maxUnavailable", "%d must be at least 1, or no machine would ever update", *ip.MaxUnavailable)
	}
	if p := m.AutoRepairPolicy; p != nil {
		validateTimeout(fe, "spec.management.autoRepairPolicy.nodeNotReadyTimeout", p.NodeNotReadyTimeout, MinNodeNotReadyTimeout, MaxNodeTimeout)
		validateTimeout(fe, "spec.management.autoRepairPolicy.nodeStartupTimeout", p.NodeStartupTimeout, MinNodeStartupTimeout, MaxNodeTimeout)
		if p.MaxUnhealthy != nil && *p.MaxUnhealthy < 0 {
			fe.Add("spec.management.autoRepairPolicy.maxUnhealthy", "%d must not be negative", *p.MaxUnhealthy)
		}
	}
}

func validateRollingUpdate(fe *FieldErrors, ru *RollingUpdate) {
	const prefix = "spec.management.replace.rollingUpdate."
	bad := false
	if ru.MaxSurge != nil && *ru.MaxSurge < 0 {
		fe.Add(prefix+"maxSurge", "%d must not be negative", *ru.MaxSurge)
		bad = true
	}
	if ru.MaxUnavailable != nil && *ru.MaxUnavailable < 0 {
		fe.Add(prefix+"maxUnavailable", "%d must not be negative", *ru.MaxUnavailable)
		bad = true
	}
	if !bad && ru.MaxSurge != nil && ru.MaxUnavailable != nil && *ru.MaxSurge == 0 && *ru.MaxUnavailable == 0 {
		fe.Add(prefix+"maxSurge", "maxSurge and maxUnavailable cannot both be 0, or a rollout could never progress")
	}
}

func validateLabels(fe *FieldErrors, labels map[string]string) {
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		field := "spec.nodeLabels." + k
		if err := validateQualifiedName(k); err != nil {
			fe.Add(field, "key %q %s", k, err)
			continue
		}
		if strings.HasPrefix(k, ReservedLabelPrefix) {
			fe.Add(field, "key %q: the prefix %s is reserved for hostplane", k, ReservedLabelPrefix)
			continue
		}
		if err := validateLabelValue(labels[k]); err != nil {
			fe.Add(field, "value %q %s", labels[k], err)
		}
	}
}

func validateTaints(fe *FieldErrors, taints []Taint) {
	seen := map[string]int{}
	for i, t := range taints {
		field := fmt.Sprintf("spec.taints[%d]", i)
		if err := validateQualifiedName(t.Key); err != nil {
			fe.Add(field+".key", "%q %s", t.Key, err)
		}
		if err := validateLabelValue(t.Value); err != nil {
			fe.Add(field+".value", "%q %s", t.Value, err)
		}
		switch t.Effect {
		case TaintEffectNoSchedule, TaintEffectPreferNoSchedule, TaintEffectNoExecute:
			id := t.Key + ":" + t.Effect
			if j, dup := seen[id]; dup {
				fe.Add(field, "repeats spec.taints[%d] (key %q, effect %s)", j, t.Key, t.Effect)
			}
			seen[id] = i
		case "":
			fe.Add(field+".effect", "is required: %s, %s or %s", TaintEffectNoSchedule, TaintEffectPreferNoSchedule, TaintEffectNoExecute)
		default:
			fe.Add(field+".effect", "%q is not a taint effect; use %s, %s or %s", t.Effect,
				TaintEffectNoSchedule, TaintEffectPreferNoSchedule, TaintEffectNoExecute)
		}
	}
}

func validateConfig(fe *FieldErrors, docs []ConfigDocument, check func(ConfigDocument) error) {
	seen := map[string]int{}
	for i, d := range docs {
		field := fmt.Sprintf("spec.config[%d]", i)
		switch {
		case d.Name == "":
			fe.Add(field+".name", "is required: it names the document in conditions and errors")
		case len(validation.IsDNS1123Subdomain(d.Name)) > 0:
			fe.Add(field+".name", "%q must be a DNS subdomain: lower-case letters, digits, '-' and '.'", d.Name)
		default:
			if j, dup := seen[d.Name]; dup {
				fe.Add(field+".name", "%q repeats spec.config[%d]", d.Name, j)
			}
			seen[d.Name] = i
		}
		if d.Redacted {
			fe.Add(field+".redacted", "the document was read redacted (without the config grant) and cannot be written back; send its content")
			continue
		}
		if strings.TrimSpace(d.Content) == "" {
			fe.Add(field+".content", "is required: an Ignition v3 config (JSON) or a MachineConfig (YAML or JSON)")
			continue
		}
		if check != nil {
			if err := check(d); err != nil {
				fe.Add(field+".content", "%s", message(err))
			}
		}
	}
}

// Ranges of a pool's timeouts: drain and volume detach 0 (no bound) to MaxNodeTimeout; the
// repair policy's not-ready timeout from MinNodeNotReadyTimeout (shorter would replace a
// machine for a missed heartbeat) and startup timeout from MinNodeStartupTimeout (shorter
// than a boot), both to MaxNodeTimeout.
const (
	MinNodeNotReadyTimeout = 10 * time.Second
	MinNodeStartupTimeout  = time.Minute
	MaxNodeTimeout         = 24 * time.Hour
)

// validateTimeout checks a Go duration field within [lo, hi]; empty is allowed (the default).
func validateTimeout(fe *FieldErrors, field, s string, lo, hi time.Duration) {
	if s == "" {
		return
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		fe.Add(field, "%q is not a duration such as 5m or 30s", s)
	case d < 0:
		fe.Add(field, "%q must not be negative", s)
	case d == 0 && lo > 0:
		fe.Add(field, "%q must be positive", s)
	case d < lo || d > hi:
		fe.Add(field, "%q must be from %v to %v", s, lo, hi)
	}
}

// validateQualifiedName checks a Kubernetes label key or taint key (validation.IsQualifiedName:
// an optional DNS subdomain prefix and '/', then a name of at most 63 characters) and says
// which part is wrong.
func validateQualifiedName(k string) error {
	prefix, _, hasPrefix := strings.Cut(k, "/")
	switch {
	case k == "":
		return errors.New("is required")
	case len(validation.IsQualifiedName(k)) == 0:
		return nil
	case hasPrefix && len(validation.IsDNS1123Subdomain(prefix)) > 0:
		return errors.New("must have a DNS subdomain prefix (example.com/name) of at most 253 characters")
	case strings.Count(k, "/") > 1:
		return errors.New("may contain at most one '/'")
	}
	return errors.New("must be a name of at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit (optionally prefixed: example.com/name)")
}

// validateLabelValue checks a label (or taint) value (validation.IsValidLabelValue): empty, or
// a name of at most 63 characters.
func validateLabelValue(v string) error {
	if len(validation.IsValidLabelValue(v)) > 0 {
		return errors.New("must be at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit")
	}
	return nil
}

// setField replaces the detail of field's error, or adds one.
func setField(fe *FieldErrors, field, detail string) {
	for i := range *fe {
		if (*fe)[i].Field == field {
			(*fe)[i].Detail = detail
			return
		}
	}
	*fe = append(*fe, FieldError{Field: field, Detail: detail})
}
