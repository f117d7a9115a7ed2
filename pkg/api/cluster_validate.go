package api

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// MaxClusterNameLength bounds cluster names below the 63 characters of a DNS label, so that
// names derived from them ("<cluster>-kube-apiserver-0", "<ns>-<cluster>") stay valid.
const MaxClusterNameLength = 40

// ReleaseCatalogue answers the release questions validation asks. pkg/release implements
// them (release.Lookup and release.CheckUpgrade); api cannot import release, which imports api.
type ReleaseCatalogue struct {
	// Known returns nil if version is in the catalogue, else an error whose message lists the
	// known versions.
	Known func(version string) error
	// CheckUpgrade returns nil if a cluster at release from may move to release to.
	CheckUpgrade func(from, to string) error
	// ParseSchedule returns nil if s is a cron schedule the spec's schedules accept
	// (clusterd uses robfig/cron's parser, the one componentd runs the schedule with).
	ParseSchedule func(s string) error
	// ParseBackupSchedule, when set, checks spec.etcd.backup.schedule instead: a schedule
	// that also fires no more often than the operator allows.
	ParseBackupSchedule func(s string) error
}

// Default fills the fields a user may leave out: platform local, SingleReplica, the default
// service and pod networks, Secret encryption with aescbc and, when
// spec.configuration.apiServer.audit is given, the audit fields it leaves out (see
// DefaultAudit).
func (s *ClusterSpec) Default() {
	if s.Platform.Type == "" {
		s.Platform.Type = PlatformLocal
	}
	if s.ControllerAvailabilityPolicy == "" {
		s.ControllerAvailabilityPolicy = SingleReplica
	}
	if s.Networking.ServiceCIDR == "" {
		s.Networking.ServiceCIDR = DefaultServiceCIDR
	}
	if s.Networking.PodCIDR == "" {
		s.Networking.PodCIDR = DefaultPodCIDR
	}
	if c := s.Configuration; c != nil && c.APIServer != nil && c.APIServer.Audit != nil {
		// Copies: the spec may share them with another (a patch's base).
		cfg, apiServer, audit := *c, *c.APIServer, c.APIServer.Audit.WithDefaults()
		apiServer.Audit = &audit
		cfg.APIServer = &apiServer
		s.Configuration = &cfg
	}
	// A copy: the spec may share it with another (a patch's base).
	enc := SecretEncryptionSpec{}
	if s.SecretEncryption != nil {
		enc = *s.SecretEncryption
	}
	if enc.Type == "" {
		enc.Type = SecretEncryptionAESCBC
	}
	s.SecretEncryption = &enc
	if s.Etcd != nil && s.Etcd.Backup != nil && s.Etcd.Backup.Retention == 0 {
		// Copies: the spec may share them with another (a patch's base).
		etcd, b := *s.Etcd, *s.Etcd.Backup
		b.Retention = DefaultBackupRetention
		etcd.Backup = &b
		s.Etcd = &etcd
	}
}

func sameRestoreSource(a, b *RestoreSource) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

// ValidateClusterName reports whether name can name a cluster: an RFC 1123 label of at most
// MaxClusterNameLength characters.
func ValidateClusterName(name string) error {
	switch {
	case name == "":
		return errors.New("is required")
	case len(name) > MaxClusterNameLength:
		return fmt.Errorf("must be at most %d characters (it is %d), so the names derived from it stay valid DNS labels", MaxClusterNameLength, len(name))
	case len(validation.IsDNS1123Label(name)) > 0:
		return fmt.Errorf("%q must be a DNS label: lower-case letters, digits and '-', starting and ending with a letter or digit", name)
	}
	return nil
}

// ValidateCluster checks a new cluster (defaults already applied) and returns an Invalid
// error naming every bad field, or nil.
func ValidateCluster(c *Cluster, releases ReleaseCatalogue) error {
	var fe FieldErrors
	if err := ValidateClusterName(c.Name); err != nil {
		fe.Add("name", "%s", err)
	}
	validateClusterSpec(&fe, &c.Spec, releases)
	return fe.Err()
}

// ValidateClusterSpec checks a spec (defaults already applied) on its own; field paths start
// at "spec.".
func ValidateClusterSpec(s *ClusterSpec, releases ReleaseCatalogue) error {
	var fe FieldErrors
	validateClusterSpec(&fe, s, releases)
	return fe.Err()
}

// ValidateClusterUpdate checks a change of a cluster's spec from old to updated (defaults
// applied to both): updated must be valid, the immutable fields unchanged, and a release
// change an allowed upgrade.
func ValidateClusterUpdate(old, updated *ClusterSpec, releases ReleaseCatalogue) error {
	var fe FieldErrors
	validateClusterSpec(&fe, updated, releases)
	if updated.Platform.Type != old.Platform.Type {
		fe.Add("spec.platform.type", "is immutable (it is %q)", old.Platform.Type)
	}
	if updated.ControllerAvailabilityPolicy != old.ControllerAvailabilityPolicy {
		fe.Add("spec.controllerAvailabilityPolicy", "is immutable (it is %q)", old.ControllerAvailabilityPolicy)
	}
	if updated.Networking.ServiceCIDR != old.Networking.ServiceCIDR {
		fe.Add("spec.networking.serviceCIDR", "is immutable (it is %q)", old.Networking.ServiceCIDR)
	}
	if updated.Networking.PodCIDR != old.Networking.PodCIDR {
		fe.Add("spec.networking.podCIDR", "is immutable (it is %q)", old.Networking.PodCIDR)
	}
	if !sameRestoreSource(old.RestoreFrom, updated.RestoreFrom) {
		fe.Add("spec.restoreFrom", "is immutable: a cluster is restored from a backup when it is created (restore in place with POST /v1/clusters/{cluster}/backups/{backup}/restore)")
	}
	if updated.Release.Version != old.Release.Version && updated.Release.Version != "" && releases.CheckUpgrade != nil {
		if err := releases.CheckUpgrade(old.Release.Version, updated.Release.Version); err != nil && !hasField(fe, "spec.release.version") {
			fe.Add("spec.release.version", "%s", message(err))
		}
	}
	return fe.Err()
}

func validateClusterSpec(fe *FieldErrors, s *ClusterSpec, releases ReleaseCatalogue) {
	switch {
	case s.Release.Version == "":
		fe.Add("spec.release.version", "is required")
	case releases.Known != nil:
		if err := releases.Known(s.Release.Version); err != nil {
			fe.Add("spec.release.version", "%s", message(err))
		}
	}
	switch s.Platform.Type {
	case PlatformLocal, PlatformDocker, PlatformNone:
	default:
		fe.Add("spec.platform.type", "%q is not a platform; use %s", s.Platform.Type, platformList())
	}
	switch s.ControllerAvailabilityPolicy {
	case SingleReplica, HighlyAvailable:
	default:
		fe.Add("spec.controllerAvailabilityPolicy", "%q is not an availability policy; use %q or %q",
			s.ControllerAvailabilityPolicy, SingleReplica, HighlyAvailable)
	}
	validateNetworking(fe, s.Networking)
	validateSecretEncryption(fe, s.SecretEncryption)
	validateAutoscaling(fe, s.Autoscaling)
	backup := releases.ParseSchedule
	if releases.ParseBackupSchedule != nil {
		backup = releases.ParseBackupSchedule
	}
	validateEtcd(fe, s.Etcd, backup)
	validateRestoreFrom(fe, s.RestoreFrom)
	validateHibernation(fe, s.Hibernation, releases.ParseSchedule)
	if a := s.AutoNode; a != nil {
		switch {
		case a.ProvisionerConfig.Name != ProvisionerKarpenter:
			fe.Add("spec.autoNode.provisionerConfig.name", "%q is not an autoprovisioner; use %q", a.ProvisionerConfig.Name, ProvisionerKarpenter)
		case s.Platform.Type != PlatformLocal:
			fe.Add("spec.autoNode", "needs platform %q (Karpenter launches machines of the local instance types); the platform is %q", PlatformLocal, s.Platform.Type)
		default:
			if v, err := ParseVersion(s.Release.Version); err == nil && (v.Major() != 1 || v.Minor() < KarpenterMinMinor || v.Minor() > KarpenterMaxMinor) {
				fe.Add("spec.autoNode", "the bundled Karpenter (%s) supports Kubernetes 1.%d to 1.%d, not release %s",
					KarpenterVersion, KarpenterMinMinor, KarpenterMaxMinor, s.Release.Version)
			}
		}
	}
	if s.PKI != nil {
		ca := validateLifetime(fe, "spec.pki.caLifetime", s.PKI.CALifetime, MinCALifetime, MaxCALifetime)
		leaf := validateLifetime(fe, "spec.pki.leafLifetime", s.PKI.LeafLifetime, MinLeafLifetime, MaxLeafLifetime)
		if ca > 0 && leaf > 0 && leaf >= ca {
			fe.Add("spec.pki.leafLifetime", "%s must be shorter than the CA lifetime %s", s.PKI.LeafLifetime, s.PKI.CALifetime)
		}
	}
	if c := s.Configuration; c != nil && c.APIServer != nil && c.APIServer.Audit != nil {
		validateAudit(fe, "spec.configuration.apiServer.audit", c.APIServer.Audit)
	}
}

// validateAudit checks an audit configuration; zero values stand for the defaults.
func validateAudit(fe *FieldErrors, path string, a *Audit) {
	if a.Profile != "" && !slices.Contains(AuditProfiles, a.Profile) {
		fe.Add(path+".profile", "%q is not an audit profile; use %s", a.Profile, strings.Join(AuditProfiles, ", "))
	}
	for _, r := range []struct {
		field, unit string
		v, max      int
	}{
		{"maxAgeDays", "days", a.MaxAgeDays, MaxAuditMaxAgeDays},
		{"maxBackups", "files", a.MaxBackups, MaxAuditMaxBackups},
		{"maxSizeMB", "MB", a.MaxSizeMB, MaxAuditMaxSizeMB},
	} {
		if r.v < 0 || r.v > r.max {
			fe.Add(path+"."+r.field, "%d must be from 1 to %d %s (0 or absent: the default)", r.v, r.max, r.unit)
		}
	}
}

func validateSecretEncryption(fe *FieldErrors, e *SecretEncryptionSpec) {
	if e == nil {
		return // the default: aescbc
	}
	switch e.Type {
	case SecretEncryptionAESCBC:
	case SecretEncryptionKMS:
		fe.Add("spec.secretEncryption.type", "%q is not supported on this platform yet; use %q (a per-cluster AES key kept by hostplane)",
			e.Type, SecretEncryptionAESCBC)
	case "":
		fe.Add("spec.secretEncryption.type", "is required; use %q", SecretEncryptionAESCBC)
	default:
		fe.Add("spec.secretEncryption.type", "%q is not a Secret encryption type; use %q", e.Type, SecretEncryptionAESCBC)
	}
}

// The Karpenter core bundled in hostplane-karpenter, and the Kubernetes minors it supports
// (its compatibility matrix): autoprovisioning is refused on other releases.
const (
	KarpenterVersion  = "v1.8.2"
	KarpenterMinMinor = 29
	KarpenterMaxMinor = 34
)

// maxNodesTotal bounds spec.autoscaling.maxNodesTotal.
const maxNodesTotal = 10000

// maxUnneededDurationSeconds bounds spec.autoscaling.scaleDown.unneededDurationSeconds: a day.
const maxUnneededDurationSeconds = 86400

func validateAutoscaling(fe *FieldErrors, a *ClusterAutoscaling) {
	if a == nil {
		return
	}
	switch a.Scaling {
	case "", ScaleUpAndScaleDown, ScaleUpOnly:
	default:
		fe.Add("spec.autoscaling.scaling", "%q is not a scaling mode; use %q or %q", a.Scaling, ScaleUpAndScaleDown, ScaleUpOnly)
	}
	if a.ScaleDown != nil && a.ScaleDown.UnneededDurationSeconds != nil {
		if v := *a.ScaleDown.UnneededDurationSeconds; v < 0 || v > maxUnneededDurationSeconds {
			fe.Add("spec.autoscaling.scaleDown.unneededDurationSeconds", "%d must be between 0 and %d (a day)", v, maxUnneededDurationSeconds)
		}
	}
	if a.MaxNodesTotal != nil && (*a.MaxNodesTotal < 1 || *a.MaxNodesTotal > maxNodesTotal) {
		fe.Add("spec.autoscaling.maxNodesTotal", "%d must be between 1 and %d", *a.MaxNodesTotal, maxNodesTotal)
	}
	if g := a.MaxPodGracePeriodSeconds; g != nil && (*g < 0 || *g > maxUnneededDurationSeconds) {
		fe.Add("spec.autoscaling.maxPodGracePeriod", "%d must be between 0 and %d seconds (a day)", *g, maxUnneededDurationSeconds)
	}
	if t := a.MaxNodeProvisionTime; t != "" {
		if d, err := time.ParseDuration(t); err != nil || d < time.Minute || d > 24*time.Hour {
			fe.Add("spec.autoscaling.maxNodeProvisionTime", "%q must be a duration from 1m to 24h, such as \"15m\"", t)
		}
	}
}

// maxServiceAddressBits is the largest service network kube-apiserver accepts: 2^20 addresses.
const maxServiceAddressBits = 20

func validateNetworking(fe *FieldErrors, n Networking) {
	svc, svcOK := parseCIDR(fe, "spec.networking.serviceCIDR", n.ServiceCIDR)
	pod, podOK := parseCIDR(fe, "spec.networking.podCIDR", n.PodCIDR)
	if svcOK && svc.Addr().BitLen()-svc.Bits() > maxServiceAddressBits {
		fe.Add("spec.networking.serviceCIDR", "%s is too large: a service network has at most 2^%d addresses (/%d for IPv4)",
			svc, maxServiceAddressBits, 32-maxServiceAddressBits)
		svcOK = false
	}
	if !svcOK || !podOK {
		return
	}
	switch {
	case svc.Addr().Is4() != pod.Addr().Is4():
		fe.Add("spec.networking.podCIDR", "%s and the service network %s must be of the same IP family", pod, svc)
	case svc.Overlaps(pod):
		fe.Add("spec.networking.podCIDR", "%s overlaps the service network %s", pod, svc)
	case pod.Bits() > n.NodeCIDRMaskSize()-minNodeRangeBits:
		fe.Add("spec.networking.podCIDR", "%s is too small: every node takes a /%d of it, and it must hold at least %d (/%d or larger)",
			pod, n.NodeCIDRMaskSize(), 1<<minNodeRangeBits, n.NodeCIDRMaskSize()-minNodeRangeBits)
	}
}

func parseCIDR(fe *FieldErrors, field, s string) (netip.Prefix, bool) {
	if s == "" {
		fe.Add(field, "is required")
		return netip.Prefix{}, false
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		fe.Add(field, "%q is not a CIDR such as 10.96.0.0/16", s)
		return netip.Prefix{}, false
	}
	if p.Addr().Is4In6() || p.Addr().Zone() != "" {
		fe.Add(field, "%q is not a plain IPv4 or IPv6 network", s)
		return netip.Prefix{}, false
	}
	if m := p.Masked(); m != p {
		fe.Add(field, "%q has host bits set; did you mean %s?", s, m)
		return netip.Prefix{}, false
	}
	return p, true
}

// validateLifetime checks a Go duration field within [lo, hi]; empty is allowed (the default).
func validateLifetime(fe *FieldErrors, field, s string, lo, hi time.Duration) time.Duration {
	if s == "" {
		return 0
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		fe.Add(field, "%q is not a duration such as 8760h or 30m", s)
		return 0
	case d <= 0:
		fe.Add(field, "%q must be positive", s)
		return 0
	case d < lo || d > hi:
		fe.Add(field, "%q must be from %s to %s", s, hours(lo), hours(hi))
		return 0
	}
	return d
}

// hours writes d as a user would: "10m", "1h", "87600h".
func hours(d time.Duration) string {
	if d%time.Hour == 0 {
		return fmt.Sprintf("%dh", d/time.Hour)
	}
	return fmt.Sprintf("%dm", d/time.Minute)
}

// message is what an error says to the caller: an Error's Message, else the error text.
func message(err error) string {
	if e, ok := errors.AsType[*Error](err); ok && e.Message != "" {
		return e.Message
	}
	return err.Error()
}

func hasField(fe FieldErrors, field string) bool {
	return slices.ContainsFunc(fe, func(f FieldError) bool { return f.Field == field })
}
