package api_test

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/release"
)

var catalogue = api.ReleaseCatalogue{
	Known:        func(v string) error { _, err := release.Lookup(v); return err },
	CheckUpgrade: release.CheckUpgrade,
}

func validCluster() *api.Cluster {
	c := &api.Cluster{Spec: api.ClusterSpec{Release: api.Release{Version: "1.34.4"}}}
	c.Name = "demo"
	c.Spec.Default()
	return c
}

func fields(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != api.CodeInvalid {
		t.Fatalf("error %v is not an Invalid api.Error", err)
	}
	var out []string
	for _, f := range ae.Fields {
		out = append(out, f.Field)
	}
	return out
}

func TestClusterSpecDefault_FillsPlatformPolicyNetworksAndSecretEncryption(t *testing.T) {
	var s api.ClusterSpec
	s.Default()
	want := api.ClusterSpec{
		Platform:                     api.Platform{Type: api.PlatformLocal},
		ControllerAvailabilityPolicy: api.SingleReplica,
		Networking:                   api.Networking{ServiceCIDR: api.DefaultServiceCIDR, PodCIDR: api.DefaultPodCIDR},
		SecretEncryption:             &api.SecretEncryptionSpec{Type: api.SecretEncryptionAESCBC},
	}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("Default() = %+v, want %+v", s, want)
	}
	s.Platform.Type = api.PlatformNone
	s.Default()
	if s.Platform.Type != api.PlatformNone {
		t.Fatalf("Default overwrote a set platform: %q", s.Platform.Type)
	}
}

func TestClusterSpec_SecretEncryptionType_IsAESCBCUnlessSaidOtherwise(t *testing.T) {
	for _, tt := range []struct {
		spec *api.SecretEncryptionSpec
		want string
	}{
		{nil, api.SecretEncryptionAESCBC}, // a cluster stored before the field existed
		{&api.SecretEncryptionSpec{}, api.SecretEncryptionAESCBC},
		{&api.SecretEncryptionSpec{Type: api.SecretEncryptionAESCBC}, api.SecretEncryptionAESCBC},
		{&api.SecretEncryptionSpec{Type: api.SecretEncryptionKMS}, api.SecretEncryptionKMS},
	} {
		s := api.ClusterSpec{SecretEncryption: tt.spec}
		if got := s.SecretEncryptionType(); got != tt.want {
			t.Errorf("SecretEncryptionType() of %+v = %q, want %q", tt.spec, got, tt.want)
		}
	}
}

func TestValidateCluster_NamesEachBadField(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(c *api.Cluster)
		want   []string // the fields named, in order
		detail string   // a fragment of the first field's detail
	}{
		{name: "valid", mutate: func(*api.Cluster) {}},
		{name: "valid highly available on platform none", mutate: func(c *api.Cluster) {
			c.Spec.ControllerAvailabilityPolicy = api.HighlyAvailable
			c.Spec.Platform.Type = api.PlatformNone
		}},
		{name: "missing name", mutate: func(c *api.Cluster) { c.Name = "" }, want: []string{"name"}, detail: "required"},
		{name: "upper-case name", mutate: func(c *api.Cluster) { c.Name = "Demo" }, want: []string{"name"}, detail: "DNS label"},
		{name: "name with a dot", mutate: func(c *api.Cluster) { c.Name = "a.b" }, want: []string{"name"}, detail: "DNS label"},
		{name: "name ending in a dash", mutate: func(c *api.Cluster) { c.Name = "demo-" }, want: []string{"name"}},
		{name: "name of 41 characters", mutate: func(c *api.Cluster) { c.Name = strings.Repeat("a", 41) }, want: []string{"name"}, detail: "at most 40"},
		{name: "name of 40 characters", mutate: func(c *api.Cluster) { c.Name = strings.Repeat("a", 40) }},
		{name: "missing release", mutate: func(c *api.Cluster) { c.Spec.Release.Version = "" }, want: []string{"spec.release.version"}, detail: "required"},
		{name: "unknown release lists the known ones", mutate: func(c *api.Cluster) { c.Spec.Release.Version = "1.20.0" },
			want: []string{"spec.release.version"}, detail: "1.33.13, 1.34.4"},
		{name: "unknown platform", mutate: func(c *api.Cluster) { c.Spec.Platform.Type = "aws" }, want: []string{"spec.platform.type"}, detail: `"aws"`},
		{name: "unknown availability policy", mutate: func(c *api.Cluster) { c.Spec.ControllerAvailabilityPolicy = "Triple" },
			want: []string{"spec.controllerAvailabilityPolicy"}, detail: "SingleReplica"},
		{name: "service CIDR not a CIDR", mutate: func(c *api.Cluster) { c.Spec.Networking.ServiceCIDR = "10.96.0.0" },
			want: []string{"spec.networking.serviceCIDR"}, detail: "not a CIDR"},
		{name: "service CIDR with host bits", mutate: func(c *api.Cluster) { c.Spec.Networking.ServiceCIDR = "10.96.0.1/16" },
			want: []string{"spec.networking.serviceCIDR"}, detail: "10.96.0.0/16"},
		{name: "service CIDR too large", mutate: func(c *api.Cluster) { c.Spec.Networking.ServiceCIDR = "10.0.0.0/8" },
			want: []string{"spec.networking.serviceCIDR"}, detail: "too large"},
		{name: "pod CIDR garbage", mutate: func(c *api.Cluster) { c.Spec.Networking.PodCIDR = "pods" }, want: []string{"spec.networking.podCIDR"}},
		{name: "overlapping networks", mutate: func(c *api.Cluster) { c.Spec.Networking.PodCIDR = "10.96.128.0/20" },
			want: []string{"spec.networking.podCIDR"}, detail: "overlaps"},
		{name: "mixed IP families", mutate: func(c *api.Cluster) { c.Spec.Networking.PodCIDR = "fd00::/48" },
			want: []string{"spec.networking.podCIDR"}, detail: "same IP family"},
		{name: "pod network smaller than four nodes' ranges", mutate: func(c *api.Cluster) { c.Spec.Networking.PodCIDR = "10.132.0.0/23" },
			want: []string{"spec.networking.podCIDR"}, detail: "/22 or larger"},
		{name: "bad CA lifetime", mutate: func(c *api.Cluster) { c.Spec.PKI = &api.PKISpec{CALifetime: "a year"} },
			want: []string{"spec.pki.caLifetime"}, detail: "duration"},
		{name: "negative leaf lifetime", mutate: func(c *api.Cluster) { c.Spec.PKI = &api.PKISpec{LeafLifetime: "-5m"} },
			want: []string{"spec.pki.leafLifetime"}, detail: "positive"},
		{name: "leaf outliving its CA", mutate: func(c *api.Cluster) { c.Spec.PKI = &api.PKISpec{CALifetime: "1h", LeafLifetime: "2h"} },
			want: []string{"spec.pki.leafLifetime"}, detail: "shorter"},
		{name: "aescbc Secret encryption", mutate: func(c *api.Cluster) {
			c.Spec.SecretEncryption = &api.SecretEncryptionSpec{Type: api.SecretEncryptionAESCBC}
		}},
		{name: "no Secret encryption given means the default", mutate: func(c *api.Cluster) { c.Spec.SecretEncryption = nil }},
		{name: "kms Secret encryption is not supported yet", mutate: func(c *api.Cluster) {
			c.Spec.SecretEncryption = &api.SecretEncryptionSpec{Type: api.SecretEncryptionKMS}
		}, want: []string{"spec.secretEncryption.type"}, detail: "not supported on this platform yet"},
		{name: "unknown Secret encryption type", mutate: func(c *api.Cluster) {
			c.Spec.SecretEncryption = &api.SecretEncryptionSpec{Type: "identity"}
		}, want: []string{"spec.secretEncryption.type"}, detail: `"identity" is not a Secret encryption type`},
		{name: "Secret encryption without a type", mutate: func(c *api.Cluster) { c.Spec.SecretEncryption = &api.SecretEncryptionSpec{} },
			want: []string{"spec.secretEncryption.type"}, detail: "required"},
		{name: "valid lifetimes in minutes", mutate: func(c *api.Cluster) { c.Spec.PKI = &api.PKISpec{CALifetime: "60m", LeafLifetime: "10m"} }},
		{name: "leaf lifetime under 10 minutes", mutate: func(c *api.Cluster) { c.Spec.PKI = &api.PKISpec{LeafLifetime: "5m"} },
			want: []string{"spec.pki.leafLifetime"}, detail: "from 10m to 87600h"},
		{name: "CA lifetime over 20 years", mutate: func(c *api.Cluster) { c.Spec.PKI = &api.PKISpec{CALifetime: "200000h"} },
			want: []string{"spec.pki.caLifetime"}, detail: "from 1h to 175200h"},
		{name: "audit profile Default", mutate: func(c *api.Cluster) { withAudit(c, api.Audit{Profile: api.AuditDefault}) }},
		{name: "audit profile WriteRequestBodies", mutate: func(c *api.Cluster) { withAudit(c, api.Audit{Profile: api.AuditWriteRequestBodies}) }},
		{name: "audit profile AllRequestBodies", mutate: func(c *api.Cluster) { withAudit(c, api.Audit{Profile: api.AuditAllRequestBodies}) }},
		{name: "audit profile None", mutate: func(c *api.Cluster) { withAudit(c, api.Audit{Profile: api.AuditNone}) }},
		{name: "audit retention at its bounds", mutate: func(c *api.Cluster) {
			withAudit(c, api.Audit{MaxAgeDays: 1, MaxBackups: api.MaxAuditMaxBackups, MaxSizeMB: api.MaxAuditMaxSizeMB})
		}},
		{name: "unknown audit profile lists the profiles", mutate: func(c *api.Cluster) { withAudit(c, api.Audit{Profile: "Verbose"}) },
			want: []string{"spec.configuration.apiServer.audit.profile"}, detail: "Default, WriteRequestBodies, AllRequestBodies, None"},
		{name: "audit profile is case-sensitive", mutate: func(c *api.Cluster) { withAudit(c, api.Audit{Profile: "none"}) },
			want: []string{"spec.configuration.apiServer.audit.profile"}, detail: `"none"`},
		{name: "negative audit retention", mutate: func(c *api.Cluster) { withAudit(c, api.Audit{MaxAgeDays: -1, MaxBackups: -1, MaxSizeMB: -1}) },
			want: []string{"spec.configuration.apiServer.audit.maxAgeDays", "spec.configuration.apiServer.audit.maxBackups",
				"spec.configuration.apiServer.audit.maxSizeMB"}, detail: "from 1 to 366 days"},
		{name: "audit files too large", mutate: func(c *api.Cluster) { withAudit(c, api.Audit{MaxSizeMB: 4096}) },
			want: []string{"spec.configuration.apiServer.audit.maxSizeMB"}, detail: "1024 MB"},
		{name: "every field at once", mutate: func(c *api.Cluster) {
			c.Name = "-"
			c.Spec = api.ClusterSpec{Release: api.Release{Version: "x"}, Platform: api.Platform{Type: "gcp"},
				ControllerAvailabilityPolicy: "x", Networking: api.Networking{ServiceCIDR: "x", PodCIDR: "y"},
				PKI: &api.PKISpec{CALifetime: "x", LeafLifetime: "y"}, SecretEncryption: &api.SecretEncryptionSpec{Type: "x"}}
		}, want: []string{"name", "spec.release.version", "spec.platform.type", "spec.controllerAvailabilityPolicy",
			"spec.networking.serviceCIDR", "spec.networking.podCIDR", "spec.secretEncryption.type", "spec.pki.caLifetime", "spec.pki.leafLifetime"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validCluster()
			tt.mutate(c)
			err := api.ValidateCluster(c, catalogue)
			got := fields(t, err)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("fields = %v, want %v (error: %v)", got, tt.want, err)
			}
			if tt.detail != "" {
				var ae *api.Error
				errors.As(err, &ae)
				if !strings.Contains(ae.Fields[0].Detail, tt.detail) {
					t.Fatalf("detail %q does not mention %q", ae.Fields[0].Detail, tt.detail)
				}
			}
		})
	}
}

// withAudit sets c's spec.configuration.apiServer.audit to a, defaulted as clusterd does.
func withAudit(c *api.Cluster, a api.Audit) *api.Cluster {
	c.Spec.Configuration = &api.ClusterConfiguration{APIServer: &api.APIServerConfiguration{Audit: &a}}
	c.Spec.Default()
	return c
}

func TestClusterSpecDefault_FillsTheAuditFieldsLeftOut(t *testing.T) {
	c := withAudit(validCluster(), api.Audit{Profile: api.AuditNone, MaxBackups: 9})
	want := api.Audit{Profile: api.AuditNone, MaxAgeDays: api.DefaultAuditMaxAgeDays, MaxBackups: 9, MaxSizeMB: api.DefaultAuditMaxSizeMB}
	if got := *c.Spec.Configuration.APIServer.Audit; got != want {
		t.Errorf("defaulted audit %+v, want %+v", got, want)
	}
	if got := c.Spec.EffectiveAudit(); got != want {
		t.Errorf("EffectiveAudit() = %+v, want %+v", got, want)
	}
	// A cluster that says nothing about audit runs the Default profile and is not rewritten.
	plain := validCluster()
	if plain.Spec.Configuration != nil {
		t.Errorf("Default() added a configuration: %+v", plain.Spec.Configuration)
	}
	if got := plain.Spec.EffectiveAudit(); got != api.DefaultAudit() || got.Profile != api.AuditDefault {
		t.Errorf("EffectiveAudit() without configuration = %+v, want %+v", got, api.DefaultAudit())
	}
}

func TestValidateClusterUpdate_RefusesImmutableFieldsAndBadUpgrades(t *testing.T) {
	tests := []struct {
		name   string
		from   string
		mutate func(s *api.ClusterSpec)
		want   []string
		detail string
	}{
		{name: "no change", from: "1.34.4", mutate: func(*api.ClusterSpec) {}},
		{name: "upgrade by one minor", from: "1.33.13", mutate: func(s *api.ClusterSpec) { s.Release.Version = "1.34.4" }},
		{name: "pki lifetimes may change", from: "1.34.4", mutate: func(s *api.ClusterSpec) { s.PKI = &api.PKISpec{LeafLifetime: "30m"} }},
		{name: "audit profile may change", from: "1.34.4", mutate: func(s *api.ClusterSpec) {
			s.Configuration = &api.ClusterConfiguration{APIServer: &api.APIServerConfiguration{Audit: &api.Audit{Profile: api.AuditNone}}}
		}},
		{name: "bad audit profile", from: "1.34.4", mutate: func(s *api.ClusterSpec) {
			s.Configuration = &api.ClusterConfiguration{APIServer: &api.APIServerConfiguration{Audit: &api.Audit{Profile: "All"}}}
		}, want: []string{"spec.configuration.apiServer.audit.profile"}, detail: "not an audit profile"},
		{name: "switching Secret encryption to kms is refused", from: "1.34.4", mutate: func(s *api.ClusterSpec) {
			s.SecretEncryption = &api.SecretEncryptionSpec{Type: api.SecretEncryptionKMS}
		}, want: []string{"spec.secretEncryption.type"}, detail: "not supported"},
		{name: "downgrade", from: "1.34.4", mutate: func(s *api.ClusterSpec) { s.Release.Version = "1.33.13" },
			want: []string{"spec.release.version"}, detail: "downgrade"},
		{name: "unknown target release", from: "1.34.4", mutate: func(s *api.ClusterSpec) { s.Release.Version = "1.35.0" },
			want: []string{"spec.release.version"}, detail: "known releases"},
		{name: "platform", from: "1.34.4", mutate: func(s *api.ClusterSpec) { s.Platform.Type = api.PlatformNone },
			want: []string{"spec.platform.type"}, detail: "immutable"},
		{name: "availability policy", from: "1.34.4", mutate: func(s *api.ClusterSpec) { s.ControllerAvailabilityPolicy = api.HighlyAvailable },
			want: []string{"spec.controllerAvailabilityPolicy"}, detail: "immutable"},
		{name: "networks", from: "1.34.4", mutate: func(s *api.ClusterSpec) {
			s.Networking = api.Networking{ServiceCIDR: "10.100.0.0/16", PodCIDR: "10.200.0.0/16"}
		}, want: []string{"spec.networking.serviceCIDR", "spec.networking.podCIDR"}, detail: "immutable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := validCluster().Spec
			old.Release.Version = tt.from
			updated := old
			tt.mutate(&updated)
			err := api.ValidateClusterUpdate(&old, &updated, catalogue)
			got := fields(t, err)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("fields = %v, want %v (error: %v)", got, tt.want, err)
			}
			if tt.detail != "" {
				var ae *api.Error
				errors.As(err, &ae)
				if !strings.Contains(ae.Fields[0].Detail, tt.detail) {
					t.Fatalf("detail %q does not mention %q", ae.Fields[0].Detail, tt.detail)
				}
			}
		})
	}
}

func TestClusterSpec_Autoscaling_BadValuesNameTheField(t *testing.T) {
	i32 := func(v int32) *int32 { return &v }
	for _, tc := range []struct {
		name string
		a    *api.ClusterAutoscaling
		want []string
	}{
		{"absent", nil, nil},
		{"scale up only", &api.ClusterAutoscaling{Scaling: api.ScaleUpOnly}, nil},
		{"zero unneeded time", &api.ClusterAutoscaling{ScaleDown: &api.ScaleDownConfig{UnneededDurationSeconds: i32(0)}}, nil},
		{"unknown scaling", &api.ClusterAutoscaling{Scaling: "Sometimes"}, []string{"spec.autoscaling.scaling"}},
		{"negative unneeded time", &api.ClusterAutoscaling{ScaleDown: &api.ScaleDownConfig{UnneededDurationSeconds: i32(-1)}},
			[]string{"spec.autoscaling.scaleDown.unneededDurationSeconds"}},
		{"over a day", &api.ClusterAutoscaling{ScaleDown: &api.ScaleDownConfig{UnneededDurationSeconds: i32(86401)}},
			[]string{"spec.autoscaling.scaleDown.unneededDurationSeconds"}},
		{"bounds", &api.ClusterAutoscaling{MaxNodesTotal: i32(12), MaxPodGracePeriodSeconds: i32(60), MaxNodeProvisionTime: "5m"}, nil},
		{"no node at all", &api.ClusterAutoscaling{MaxNodesTotal: i32(0)}, []string{"spec.autoscaling.maxNodesTotal"}},
		{"negative grace period", &api.ClusterAutoscaling{MaxPodGracePeriodSeconds: i32(-5)}, []string{"spec.autoscaling.maxPodGracePeriod"}},
		{"provision time not a duration", &api.ClusterAutoscaling{MaxNodeProvisionTime: "soon"}, []string{"spec.autoscaling.maxNodeProvisionTime"}},
		{"provision time too short", &api.ClusterAutoscaling{MaxNodeProvisionTime: "10s"}, []string{"spec.autoscaling.maxNodeProvisionTime"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validCluster()
			c.Spec.Autoscaling = tc.a
			if got := fields(t, api.ValidateCluster(c, catalogue)); !slices.Equal(got, tc.want) {
				t.Errorf("fields %v, want %v", got, tc.want)
			}
		})
	}
}

func TestClusterSpec_EffectiveAutoscaling_FillsTheDefaults(t *testing.T) {
	var s api.ClusterSpec
	a := s.EffectiveAutoscaling()
	if a.Scaling != api.ScaleUpAndScaleDown || a.ScaleDown == nil || *a.ScaleDown.UnneededDurationSeconds != api.DefaultUnneededDurationSeconds ||
		a.MaxNodesTotal != nil || a.MaxPodGracePeriodSeconds == nil || *a.MaxPodGracePeriodSeconds != api.DefaultMaxPodGracePeriodSeconds ||
		a.MaxNodeProvisionTime != api.DefaultMaxNodeProvisionTime {
		t.Errorf("defaults = %+v", a)
	}
	ten := int32(10)
	s.Autoscaling = &api.ClusterAutoscaling{Scaling: api.ScaleUpOnly, ScaleDown: &api.ScaleDownConfig{UnneededDurationSeconds: &ten}}
	if a := s.EffectiveAutoscaling(); a.Scaling != api.ScaleUpOnly || *a.ScaleDown.UnneededDurationSeconds != 10 {
		t.Errorf("effective = %+v, want ScaleUpOnly and 10s", a)
	}
}

func TestClusterAutoscaling_AutoscalerFlags_CarryEveryOption(t *testing.T) {
	var s api.ClusterSpec
	if got, want := strings.Join(s.EffectiveAutoscaling().AutoscalerFlags(), " "),
		"--scale-down=true --unneeded-time=10m0s --max-pod-grace-period=10m0s --max-node-provision-time=15m"; got != want {
		t.Errorf("defaults: %s, want %s", got, want)
	}
	two, ten, grace := int32(2), int32(10), int32(30)
	s.Autoscaling = &api.ClusterAutoscaling{Scaling: api.ScaleUpOnly, ScaleDown: &api.ScaleDownConfig{UnneededDurationSeconds: &ten},
		MaxNodesTotal: &two, MaxPodGracePeriodSeconds: &grace, MaxNodeProvisionTime: "5m"}
	if got, want := strings.Join(s.EffectiveAutoscaling().AutoscalerFlags(), " "),
		"--scale-down=false --unneeded-time=10s --max-nodes-total=2 --max-pod-grace-period=30s --max-node-provision-time=5m"; got != want {
		t.Errorf("set: %s, want %s", got, want)
	}
}

func TestClusterSpec_AutoNode_OnlyOnReleasesTheBundledKarpenterSupports(t *testing.T) {
	anyRelease := api.ReleaseCatalogue{Known: func(string) error { return nil }}
	for _, tc := range []struct {
		version string
		want    []string
	}{
		{"1.34.4", nil},
		{"1.29.0", nil},
		{"1.35.0", []string{"spec.autoNode"}},
		{"1.28.9", []string{"spec.autoNode"}},
	} {
		c := validCluster()
		c.Spec.Release.Version = tc.version
		c.Spec.AutoNode = &api.AutoNode{ProvisionerConfig: api.ProvisionerConfig{Name: api.ProvisionerKarpenter}}
		if got := fields(t, api.ValidateCluster(c, anyRelease)); !slices.Equal(got, tc.want) {
			t.Errorf("autoNode at %s: fields %v, want %v", tc.version, got, tc.want)
		}
	}
}
