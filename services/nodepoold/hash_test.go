package nodepoold

import (
	"testing"

	"github.com/hostplane/hostplane/pkg/api"
)

func hashPool() api.NodePoolSpec {
	three := int32(3)
	s := api.NodePoolSpec{
		Replicas:   &three,
		Release:    api.Release{Version: "1.34.4"},
		Platform:   api.NodePoolPlatform{Type: api.PlatformLocal},
		Management: api.NodePoolManagement{UpgradeType: api.UpgradeTypeReplace},
		Config:     []api.ConfigDocument{{Name: "motd", Content: "{}"}},
	}
	s.Default(nil)
	return s
}

func TestConfigHash_ChangesExactlyWithTheInputsThatRollMachines(t *testing.T) {
	base := ConfigHash(&[]api.NodePoolSpec{hashPool()}[0])
	if len(base) != 64 {
		t.Fatalf("hash %q is not hex sha256", base)
	}
	five, one := int32(5), int32(1)
	tests := []struct {
		name  string
		roll  bool
		apply func(s *api.NodePoolSpec)
	}{
		{"release", true, func(s *api.NodePoolSpec) { s.Release.Version = "1.33.13" }},
		{"config content", true, func(s *api.NodePoolSpec) { s.Config[0].Content = `{"ignition":{"version":"3.4.0"}}` }},
		{"config name", true, func(s *api.NodePoolSpec) { s.Config[0].Name = "motd2" }},
		{"another config document", true, func(s *api.NodePoolSpec) { s.Config = append(s.Config, api.ConfigDocument{Name: "b", Content: "{}"}) }},
		{"config order", true, func(s *api.NodePoolSpec) {
			s.Config = []api.ConfigDocument{{Name: "b", Content: "{}"}, s.Config[0]}
		}},
		{"no config", true, func(s *api.NodePoolSpec) { s.Config = nil }},
		{"platform", true, func(s *api.NodePoolSpec) { s.Platform.Type = api.PlatformNone }},
		{"instance type", true, func(s *api.NodePoolSpec) { s.Platform.Local.InstanceType = "local.large" }},
		{"default instance type spelled out", false, func(s *api.NodePoolSpec) { s.Platform.Local = nil }},
		{"replicas", false, func(s *api.NodePoolSpec) { s.Replicas = &five }},
		{"autoscaling", false, func(s *api.NodePoolSpec) { s.Replicas, s.AutoScaling = nil, &api.NodePoolAutoScaling{Min: 1, Max: 9} }},
		{"labels", false, func(s *api.NodePoolSpec) { s.NodeLabels = map[string]string{"tier": "gold"} }},
		{"taints", false, func(s *api.NodePoolSpec) { s.Taints = []api.Taint{{Key: "a", Effect: "NoSchedule"}} }},
		{"drain and detach timeouts", false, func(s *api.NodePoolSpec) { s.NodeDrainTimeout, s.NodeVolumeDetachTimeout = "5m", "1m" }},
		{"autorepair and its policy", false, func(s *api.NodePoolSpec) {
			s.Management.AutoRepair = true
			s.Management.AutoRepairPolicy = &api.AutoRepairPolicy{NodeNotReadyTimeout: "1m", MaxUnhealthy: &one}
		}},
		{"rollout bounds", false, func(s *api.NodePoolSpec) { s.Management.Replace.RollingUpdate.MaxSurge = &five }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := hashPool()
			tt.apply(&s)
			got := ConfigHash(&s)
			if changed := got != base; changed != tt.roll {
				t.Fatalf("hash changed = %v, want %v", changed, tt.roll)
			}
			if again := ConfigHash(&s); again != got {
				t.Fatalf("hash is not deterministic: %s, %s", got, again)
			}
		})
	}
	empty := hashPool()
	empty.Config = nil
	emptyList := hashPool()
	emptyList.Config = []api.ConfigDocument{}
	if ConfigHash(&empty) != ConfigHash(&emptyList) {
		t.Errorf("no config documents and an empty list hash differently")
	}
}
