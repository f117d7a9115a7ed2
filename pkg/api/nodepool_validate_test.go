package api_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/hostplane/hostplane/pkg/api"
)

func ptr[T any](v T) *T { return &v }

// anyRelease accepts every version, so the skew rules can be tested beyond the catalogue.
var anyRelease = api.NodePoolChecks{Releases: api.ReleaseCatalogue{Known: func(string) error { return nil }}}

// catalogueChecks checks releases against the real catalogue and refuses config documents
// whose content says "bad".
var catalogueChecks = api.NodePoolChecks{
	Releases: catalogue,
	Config: func(d api.ConfigDocument) error {
		if strings.Contains(d.Content, "bad") {
			return errors.New("not an Ignition config")
		}
		return nil
	},
}

// wantFields checks that err names exactly the fields want, the first with a detail
// mentioning detail (when not "").
func wantFields(t *testing.T, err error, want []string, detail string) {
	t.Helper()
	got := fields(t, err)
	if !slices.Equal(got, want) {
		t.Fatalf("fields = %v, want %v (error: %v)", got, want, err)
	}
	if detail != "" {
		var ae *api.Error
		errors.As(err, &ae)
		if !strings.Contains(ae.Fields[0].Detail, detail) {
			t.Fatalf("detail %q does not mention %q", ae.Fields[0].Detail, detail)
		}
	}
}

func poolCluster(release string) *api.Cluster {
	c := validCluster()
	c.Spec.Release.Version = release
	return c
}

func validPool() *api.NodePool {
	np := &api.NodePool{Cluster: "demo", Spec: api.NodePoolSpec{
		Replicas:   ptr[int32](3),
		Release:    api.Release{Version: "1.34.4"},
		Management: api.NodePoolManagement{UpgradeType: api.UpgradeTypeReplace, AutoRepair: true},
	}}
	np.Name = "workers"
	np.Spec.Default(&poolCluster("1.34.4").Spec)
	return np
}

func TestNodePoolSpecDefault_FillsPlatformAndRolloutBounds(t *testing.T) {
	np := validPool()
	if np.Spec.Platform.Type != api.PlatformLocal {
		t.Errorf("platform = %q, want the cluster's %q", np.Spec.Platform.Type, api.PlatformLocal)
	}
	r := np.Spec.Management.Replace
	if r == nil || r.Strategy != api.ReplaceStrategyRollingUpdate || *r.RollingUpdate.MaxSurge != 1 || *r.RollingUpdate.MaxUnavailable != 0 {
		t.Errorf("replace defaults = %+v", r)
	}
	in := api.NodePoolSpec{Release: api.Release{Version: "v1.34.4"}, Management: api.NodePoolManagement{UpgradeType: api.UpgradeTypeInPlace}}
	in.Default(&poolCluster("1.34.4").Spec)
	if in.Management.InPlace == nil || *in.Management.InPlace.MaxUnavailable != 1 || in.Management.Replace != nil {
		t.Errorf("in-place defaults = %+v", in.Management)
	}
	if in.Release.Version != "1.34.4" {
		t.Errorf("release = %q, want the leading v dropped", in.Release.Version)
	}
	if in.Replicas != nil || in.DesiredReplicas() != 0 {
		t.Errorf("replicas defaulted to %v; an unset size means 0 without being stored", in.Replicas)
	}
}

func TestValidateNodePool_NamesEachBadField(t *testing.T) {
	tests := []struct {
		name    string
		cluster string // the cluster's release; default 1.34.4
		checks  *api.NodePoolChecks
		mutate  func(np *api.NodePool)
		want    []string
		detail  string // a fragment of the first field's detail
	}{
		{name: "valid", mutate: func(*api.NodePool) {}},
		{name: "autoscaled in-place pool", mutate: func(np *api.NodePool) {
			np.Spec.Replicas = nil
			np.Spec.AutoScaling = &api.NodePoolAutoScaling{Min: 0, Max: 5}
			np.Spec.Management = api.NodePoolManagement{UpgradeType: api.UpgradeTypeInPlace}
		}, want: []string{"spec.autoScaling"}, detail: "not supported"},
		{name: "valid in-place pool", mutate: func(np *api.NodePool) {
			np.Spec.Management = api.NodePoolManagement{UpgradeType: api.UpgradeTypeInPlace, InPlace: &api.InPlaceUpgrade{MaxUnavailable: ptr[int32](2)}}
		}},
		{name: "valid autoscaled pool with everything", mutate: func(np *api.NodePool) {
			np.Spec.Replicas = nil
			np.Spec.AutoScaling = &api.NodePoolAutoScaling{Min: 0, Max: 5}
			np.Spec.Management = api.NodePoolManagement{UpgradeType: api.UpgradeTypeReplace,
				Replace:          &api.ReplaceUpgrade{Strategy: api.ReplaceStrategyRollingUpdate, RollingUpdate: &api.RollingUpdate{MaxSurge: ptr[int32](2), MaxUnavailable: ptr[int32](1)}},
				AutoRepairPolicy: &api.AutoRepairPolicy{NodeNotReadyTimeout: "20s", NodeStartupTimeout: "5m", MaxUnhealthy: ptr[int32](0)}}
			np.Spec.NodeLabels = map[string]string{"tier": "gold", "example.com/zone": "a_b.c", "empty": ""}
			np.Spec.Taints = []api.Taint{{Key: "dedicated", Value: "gpu", Effect: "NoSchedule"}, {Key: "dedicated", Effect: "NoExecute"}}
			np.Spec.Config = []api.ConfigDocument{{Name: "motd", Content: "{}"}, {Name: "ntp.conf", Content: "{}"}}
			np.Spec.NodeDrainTimeout, np.Spec.NodeVolumeDetachTimeout = "0s", "2m30s"
		}},
		{name: "older release within the skew", checks: &anyRelease, mutate: func(np *api.NodePool) { np.Spec.Release.Version = "1.31.0" }},
		{name: "missing name", mutate: func(np *api.NodePool) { np.Name = "" }, want: []string{"name"}, detail: "required"},
		{name: "name not a DNS label", mutate: func(np *api.NodePool) { np.Name = "Workers_1" }, want: []string{"name"}, detail: "DNS label"},
		{name: "name too long for the userdata Secret", mutate: func(np *api.NodePool) { np.Name = strings.Repeat("w", 46) },
			want: []string{"name"}, detail: "at most 45"},
		{name: "name of 45 characters", mutate: func(np *api.NodePool) { np.Name = strings.Repeat("w", 45) }},
		{name: "replicas and autoScaling together", mutate: func(np *api.NodePool) { np.Spec.AutoScaling = &api.NodePoolAutoScaling{Min: 1, Max: 2} },
			want: []string{"spec.replicas", "spec.autoScaling"}, detail: "together"},
		{name: "negative replicas", mutate: func(np *api.NodePool) { np.Spec.Replicas = ptr[int32](-1) }, want: []string{"spec.replicas"}},
		{name: "autoscaling min above max", mutate: func(np *api.NodePool) {
			np.Spec.Replicas, np.Spec.AutoScaling = nil, &api.NodePoolAutoScaling{Min: 3, Max: 2}
		}, want: []string{"spec.autoScaling.max"}, detail: "less than min"},
		{name: "autoscaling max 0", mutate: func(np *api.NodePool) {
			np.Spec.Replicas, np.Spec.AutoScaling = nil, &api.NodePoolAutoScaling{Min: 0, Max: 0}
		}, want: []string{"spec.autoScaling.max"}, detail: "at least 1"},
		{name: "autoscaling negative min", mutate: func(np *api.NodePool) {
			np.Spec.Replicas, np.Spec.AutoScaling = nil, &api.NodePoolAutoScaling{Min: -1, Max: 2}
		}, want: []string{"spec.autoScaling.min"}},
		{name: "missing upgrade type", mutate: func(np *api.NodePool) { np.Spec.Management.UpgradeType = ""; np.Spec.Management.Replace = nil },
			want: []string{"spec.management.upgradeType"}, detail: "required"},
		{name: "unknown upgrade type", mutate: func(np *api.NodePool) { np.Spec.Management.UpgradeType = "Recreate" },
			want: []string{"spec.management.upgradeType"}, detail: "Replace"},
		{name: "unknown strategy", mutate: func(np *api.NodePool) { np.Spec.Management.Replace.Strategy = "BlueGreen" },
			want: []string{"spec.management.replace.strategy"}, detail: "OnDelete"},
		{name: "OnDelete with rolling update bounds", mutate: func(np *api.NodePool) { np.Spec.Management.Replace.Strategy = api.ReplaceStrategyOnDelete },
			want: []string{"spec.management.replace.rollingUpdate"}},
		{name: "negative maxSurge", mutate: func(np *api.NodePool) { np.Spec.Management.Replace.RollingUpdate.MaxSurge = ptr[int32](-1) },
			want: []string{"spec.management.replace.rollingUpdate.maxSurge"}, detail: "negative"},
		{name: "negative maxUnavailable", mutate: func(np *api.NodePool) { np.Spec.Management.Replace.RollingUpdate.MaxUnavailable = ptr[int32](-2) },
			want: []string{"spec.management.replace.rollingUpdate.maxUnavailable"}},
		{name: "maxSurge and maxUnavailable both 0", mutate: func(np *api.NodePool) { np.Spec.Management.Replace.RollingUpdate.MaxSurge = ptr[int32](0) },
			want: []string{"spec.management.replace.rollingUpdate.maxSurge"}, detail: "both be 0"},
		{name: "inPlace settings on a Replace pool", mutate: func(np *api.NodePool) { np.Spec.Management.InPlace = &api.InPlaceUpgrade{} },
			want: []string{"spec.management.inPlace"}},
		{name: "in-place maxUnavailable 0", mutate: func(np *api.NodePool) {
			np.Spec.Management = api.NodePoolManagement{UpgradeType: api.UpgradeTypeInPlace, InPlace: &api.InPlaceUpgrade{MaxUnavailable: ptr[int32](0)}}
		}, want: []string{"spec.management.inPlace.maxUnavailable"}},
		{name: "unknown release lists the known ones", mutate: func(np *api.NodePool) { np.Spec.Release.Version = "1.20.0" },
			want: []string{"spec.release.version"}, detail: "1.33.13, 1.34.4"},
		{name: "missing release", mutate: func(np *api.NodePool) { np.Spec.Release.Version = "" }, want: []string{"spec.release.version"}, detail: "required"},
		{name: "release newer than the control plane", cluster: "1.33.13", mutate: func(np *api.NodePool) {},
			want: []string{"spec.release.version"}, detail: "newer than the cluster"},
		{name: "release four minors older", cluster: "1.34.4", checks: &anyRelease, mutate: func(np *api.NodePool) { np.Spec.Release.Version = "1.30.9" },
			want: []string{"spec.release.version"}, detail: "more than 3 minor"},
		{name: "platform unlike the cluster's", mutate: func(np *api.NodePool) { np.Spec.Platform.Type = api.PlatformNone },
			want: []string{"spec.platform.type"}, detail: "cluster's platform"},
		{name: "unknown platform", mutate: func(np *api.NodePool) { np.Spec.Platform.Type = "aws" }, want: []string{"spec.platform.type"}},
		{name: "bad label key", mutate: func(np *api.NodePool) { np.Spec.NodeLabels = map[string]string{"bad key": "x"} },
			want: []string{"spec.nodeLabels.bad key"}, detail: "key"},
		{name: "label key with two slashes", mutate: func(np *api.NodePool) { np.Spec.NodeLabels = map[string]string{"a/b/c": "x"} },
			want: []string{"spec.nodeLabels.a/b/c"}},
		{name: "label key with a bad prefix", mutate: func(np *api.NodePool) { np.Spec.NodeLabels = map[string]string{"Example.com/x": "x"} },
			want: []string{"spec.nodeLabels.Example.com/x"}, detail: "prefix"},
		{name: "reserved label prefix", mutate: func(np *api.NodePool) { np.Spec.NodeLabels = map[string]string{api.LabelNodePool: "other"} },
			want: []string{"spec.nodeLabels." + api.LabelNodePool}, detail: "reserved"},
		{name: "label value too long", mutate: func(np *api.NodePool) { np.Spec.NodeLabels = map[string]string{"tier": strings.Repeat("g", 64)} },
			want: []string{"spec.nodeLabels.tier"}, detail: "value"},
		{name: "taint without a key", mutate: func(np *api.NodePool) { np.Spec.Taints = []api.Taint{{Effect: "NoSchedule"}} },
			want: []string{"spec.taints[0].key"}},
		{name: "taint with a bad effect", mutate: func(np *api.NodePool) { np.Spec.Taints = []api.Taint{{Key: "a", Effect: "NoWay"}} },
			want: []string{"spec.taints[0].effect"}, detail: "NoExecute"},
		{name: "taint without an effect", mutate: func(np *api.NodePool) { np.Spec.Taints = []api.Taint{{Key: "a"}} },
			want: []string{"spec.taints[0].effect"}, detail: "required"},
		{name: "repeated taint", mutate: func(np *api.NodePool) {
			np.Spec.Taints = []api.Taint{{Key: "a", Effect: "NoSchedule"}, {Key: "a", Value: "x", Effect: "NoSchedule"}}
		}, want: []string{"spec.taints[1]"}, detail: "repeats"},
		{name: "bad taint value", mutate: func(np *api.NodePool) { np.Spec.Taints = []api.Taint{{Key: "a", Value: "a b", Effect: "NoSchedule"}} },
			want: []string{"spec.taints[0].value"}},
		{name: "bad drain timeout", mutate: func(np *api.NodePool) { np.Spec.NodeDrainTimeout = "five minutes" },
			want: []string{"spec.nodeDrainTimeout"}, detail: "duration"},
		{name: "negative volume detach timeout", mutate: func(np *api.NodePool) { np.Spec.NodeVolumeDetachTimeout = "-1m" },
			want: []string{"spec.nodeVolumeDetachTimeout"}, detail: "negative"},
		{name: "drain timeout over a day", mutate: func(np *api.NodePool) { np.Spec.NodeDrainTimeout = "25h" },
			want: []string{"spec.nodeDrainTimeout"}, detail: "from 0s to 24h0m0s"},
		{name: "node-not-ready timeout of one missed heartbeat", mutate: func(np *api.NodePool) {
			np.Spec.Management.AutoRepairPolicy = &api.AutoRepairPolicy{NodeNotReadyTimeout: "5s"}
		}, want: []string{"spec.management.autoRepairPolicy.nodeNotReadyTimeout"}, detail: "from 10s to 24h0m0s"},
		{name: "startup timeout shorter than a boot", mutate: func(np *api.NodePool) {
			np.Spec.Management.AutoRepairPolicy = &api.AutoRepairPolicy{NodeStartupTimeout: "30s"}
		}, want: []string{"spec.management.autoRepairPolicy.nodeStartupTimeout"}, detail: "from 1m0s to 24h0m0s"},
		{name: "zero node-not-ready timeout", mutate: func(np *api.NodePool) {
			np.Spec.Management.AutoRepairPolicy = &api.AutoRepairPolicy{NodeNotReadyTimeout: "0s"}
		}, want: []string{"spec.management.autoRepairPolicy.nodeNotReadyTimeout"}, detail: "positive"},
		{name: "bad startup timeout and negative maxUnhealthy", mutate: func(np *api.NodePool) {
			np.Spec.Management.AutoRepairPolicy = &api.AutoRepairPolicy{NodeStartupTimeout: "soon", MaxUnhealthy: ptr[int32](-1)}
		}, want: []string{"spec.management.autoRepairPolicy.nodeStartupTimeout", "spec.management.autoRepairPolicy.maxUnhealthy"}},
		{name: "config document without a name", mutate: func(np *api.NodePool) { np.Spec.Config = []api.ConfigDocument{{Content: "{}"}} },
			want: []string{"spec.config[0].name"}, detail: "required"},
		{name: "config document names repeat", mutate: func(np *api.NodePool) {
			np.Spec.Config = []api.ConfigDocument{{Name: "a", Content: "{}"}, {Name: "a", Content: "{}"}}
		}, want: []string{"spec.config[1].name"}, detail: "repeats"},
		{name: "empty config document", mutate: func(np *api.NodePool) { np.Spec.Config = []api.ConfigDocument{{Name: "a", Content: " "}} },
			want: []string{"spec.config[0].content"}, detail: "required"},
		{name: "config document that does not parse", mutate: func(np *api.NodePool) {
			np.Spec.Config = []api.ConfigDocument{{Name: "ok", Content: "{}"}, {Name: "broken", Content: "bad"}}
		}, want: []string{"spec.config[1].content"}, detail: "not an Ignition config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			np := validPool()
			tt.mutate(np)
			cluster := poolCluster("1.34.4")
			if tt.cluster != "" {
				cluster = poolCluster(tt.cluster)
			}
			checks := catalogueChecks
			if tt.checks != nil {
				checks = *tt.checks
			}
			wantFields(t, api.ValidateNodePool(np, cluster, checks), tt.want, tt.detail)
		})
	}
}

func TestValidateNodePoolUpdate_KeepsUpgradeTypeAndPlatformAndChecksNewReleases(t *testing.T) {
	tests := []struct {
		name    string
		cluster string
		from    string
		mutate  func(s *api.NodePoolSpec)
		want    []string
		detail  string
	}{
		{name: "scale", from: "1.34.4", mutate: func(s *api.NodePoolSpec) { s.Replicas = ptr[int32](5) }},
		{name: "labels and config", from: "1.34.4", mutate: func(s *api.NodePoolSpec) {
			s.NodeLabels = map[string]string{"tier": "gold"}
			s.Config = []api.ConfigDocument{{Name: "motd", Content: "{}"}}
		}},
		{name: "upgrade to the control plane's release", cluster: "1.34.4", from: "1.33.13", mutate: func(s *api.NodePoolSpec) { s.Release.Version = "1.34.4" }},
		{name: "a pool the control plane left behind may still scale", cluster: "1.34.4", from: "1.29.0", mutate: func(s *api.NodePoolSpec) { s.Replicas = ptr[int32](1) }},
		{name: "upgrade type is immutable", from: "1.34.4", mutate: func(s *api.NodePoolSpec) {
			s.Management.UpgradeType = api.UpgradeTypeInPlace
			s.Management.Replace = nil
			s.Management.InPlace = &api.InPlaceUpgrade{MaxUnavailable: ptr[int32](1)}
		}, want: []string{"spec.management.upgradeType"}, detail: "immutable"},
		{name: "removing the upgrade type is refused as immutable", from: "1.34.4", mutate: func(s *api.NodePoolSpec) {
			s.Management.UpgradeType = ""
			s.Management.Replace = nil
		}, want: []string{"spec.management.upgradeType"}, detail: "immutable"},
		{name: "platform is immutable", from: "1.34.4", mutate: func(s *api.NodePoolSpec) { s.Platform.Type = api.PlatformNone },
			want: []string{"spec.platform.type"}, detail: "immutable"},
		{name: "upgrade beyond the control plane", cluster: "1.33.13", from: "1.33.13", mutate: func(s *api.NodePoolSpec) { s.Release.Version = "1.34.4" },
			want: []string{"spec.release.version"}, detail: "newer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cluster := poolCluster(tt.cluster)
			if tt.cluster == "" {
				cluster = poolCluster("1.34.4")
			}
			old := validPool().Spec
			old.Release.Version = tt.from
			updated := old
			updated.Management.Replace = &api.ReplaceUpgrade{Strategy: old.Management.Replace.Strategy, RollingUpdate: old.Management.Replace.RollingUpdate}
			tt.mutate(&updated)
			updated.Default(&cluster.Spec)
			wantFields(t, api.ValidateNodePoolUpdate(&old, &updated, cluster, anyRelease), tt.want, tt.detail)
		})
	}
}

func TestCheckNodePoolRelease_AllowsUpToThreeMinorsBehindAndNeverAhead(t *testing.T) {
	tests := []struct {
		cluster, pool string
		ok            bool
	}{
		{"1.34.4", "1.34.4", true},
		{"1.34.4", "1.34.1", true},
		{"1.34.4", "1.31.0", true},
		{"1.34.4", "1.30.14", false},
		{"1.34.4", "1.34.5", false},
		{"1.33.13", "1.34.4", false},
		{"1.34.4", "2.34.4", false},
		{"1.34.4", "1.x.4", false},
	}
	for _, tt := range tests {
		err := api.CheckNodePoolRelease(tt.cluster, tt.pool)
		if (err == nil) != tt.ok {
			t.Errorf("CheckNodePoolRelease(%s, %s) = %v, want ok=%v", tt.cluster, tt.pool, err, tt.ok)
		}
	}
}

func TestNodePoolSpecDefault_GivesALocalPoolTheDefaultInstanceTypeAndKeepsAChosenOne(t *testing.T) {
	np := validPool()
	if np.Spec.Platform.Local == nil || np.Spec.Platform.Local.InstanceType != api.DefaultInstanceType {
		t.Fatalf("platform.local = %+v, want instanceType %s", np.Spec.Platform.Local, api.DefaultInstanceType)
	}
	chosen := api.NodePoolSpec{Platform: api.NodePoolPlatform{Local: &api.LocalNodePoolPlatform{InstanceType: "local.small"}}}
	chosen.Default(&poolCluster("1.34.4").Spec)
	if got := chosen.Platform.InstanceType(); got != "local.small" {
		t.Errorf("instance type = %q, want the chosen local.small", got)
	}
	none := api.NodePoolSpec{Platform: api.NodePoolPlatform{Type: api.PlatformNone}}
	none.Default(nil)
	if none.Platform.Local != nil || none.Platform.InstanceType() != "" {
		t.Errorf("a pool on platform none got an instance type: %+v", none.Platform)
	}
	if _, ok := api.LocalInstanceType(api.DefaultInstanceType); !ok {
		t.Errorf("the default instance type %s is not in the catalogue", api.DefaultInstanceType)
	}
}

func TestValidateNodePool_InstanceType(t *testing.T) {
	tests := []struct {
		name    string
		cluster string // platform; default local
		mutate  func(np *api.NodePool)
		want    []string
		detail  string
	}{
		{name: "every catalogue type", mutate: func(np *api.NodePool) {}},
		{name: "unknown type names the valid ones", mutate: func(np *api.NodePool) { np.Spec.Platform.Local.InstanceType = "local.huge" },
			want: []string{"spec.platform.local.instanceType"}, detail: `"local.huge" is not an instance type of the local platform; use one of ` + api.LocalInstanceTypeNames()},
		{name: "local settings on platform none", cluster: api.PlatformNone, mutate: func(np *api.NodePool) {
			np.Spec.Platform.Type = api.PlatformNone
		}, want: []string{"spec.platform.local"}, detail: `applies only to platforms "local" and "docker"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.want == nil {
				for _, it := range api.LocalInstanceTypes() {
					np := validPool()
					np.Spec.Platform.Local.InstanceType = it.Name
					if err := api.ValidateNodePool(np, poolCluster("1.34.4"), catalogueChecks); err != nil {
						t.Errorf("%s: %v", it.Name, err)
					}
				}
				return
			}
			np := validPool()
			tt.mutate(np)
			c := poolCluster("1.34.4")
			if tt.cluster != "" {
				c.Spec.Platform.Type = tt.cluster
			}
			err := api.ValidateNodePool(np, c, catalogueChecks)
			var ae *api.Error
			if !errors.As(err, &ae) || ae.Code != api.CodeInvalid {
				t.Fatalf("err = %v, want invalid", err)
			}
			wantFields(t, err, tt.want, tt.detail)
		})
	}
}

func TestValidateNodePoolUpdate_InstanceTypeRollsAReplacePoolButIsImmutableInPlace(t *testing.T) {
	c := poolCluster("1.34.4")
	old := validPool()
	replace := validPool()
	replace.Spec.Platform.Local.InstanceType = "local.large"
	if err := api.ValidateNodePoolUpdate(&old.Spec, &replace.Spec, c, catalogueChecks); err != nil {
		t.Errorf("a Replace pool's instance type change refused: %v", err)
	}
	inPlace := func(it string) *api.NodePoolSpec {
		s := api.NodePoolSpec{Replicas: ptr[int32](1), Release: api.Release{Version: "1.34.4"},
			Platform:   api.NodePoolPlatform{Local: &api.LocalNodePoolPlatform{InstanceType: it}},
			Management: api.NodePoolManagement{UpgradeType: api.UpgradeTypeInPlace}}
		s.Default(&c.Spec)
		return &s
	}
	err := api.ValidateNodePoolUpdate(inPlace("local.small"), inPlace("local.large"), c, catalogueChecks)
	wantFields(t, err, []string{"spec.platform.local.instanceType"}, `is immutable for upgradeType InPlace (it is "local.small")`)
	if err := api.ValidateNodePoolUpdate(inPlace(""), inPlace(api.DefaultInstanceType), c, catalogueChecks); err != nil {
		t.Errorf("spelling out the default type of an InPlace pool refused: %v", err)
	}
}

// A pool on platform docker takes its shape from the local catalogue, as a local one does.
func TestNodePoolSpecDefault_DockerPoolsGetTheDefaultInstanceType(t *testing.T) {
	cluster := &api.ClusterSpec{Platform: api.Platform{Type: api.PlatformDocker}}
	s := api.NodePoolSpec{}
	s.Default(cluster)
	if s.Platform.Type != api.PlatformDocker || s.Platform.InstanceType() != api.DefaultInstanceType {
		t.Errorf("defaulted platform %+v (instance type %q), want docker with %s", s.Platform, s.Platform.InstanceType(), api.DefaultInstanceType)
	}
	if !api.RealNodes(api.PlatformDocker) || !api.ProvidesMachines(api.PlatformDocker) || api.RealNodes(api.PlatformLocal) || api.ProvidesMachines(api.PlatformNone) {
		t.Error("docker machines are real and Hostplane's; local ones simulated; none's the user's")
	}
}
