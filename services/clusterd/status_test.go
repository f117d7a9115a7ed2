package clusterd

import (
	"strings"
	"testing"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
)

func newCluster(version string) *api.Cluster {
	c := &api.Cluster{Spec: api.ClusterSpec{Release: api.Release{Version: version}}}
	c.Name = "demo"
	c.Generation = 1
	c.Spec.Default()
	return c
}

func component(name, version string, ready, replicas int, conds ...api.Condition) *api.ControlPlaneComponent {
	c := &api.ControlPlaneComponent{Cluster: "demo", Spec: api.ControlPlaneComponentSpec{Version: version, Replicas: replicas}}
	c.Name = name
	c.Generation = 1
	c.Status.ObservedGeneration = 1
	c.Status.Version = version
	c.Status.ReadyReplicas = ready
	for _, cond := range conds {
		c.Status.Conditions.Set(cond, time.Unix(0, 0))
	}
	return c
}

func ready(types ...string) []api.Condition {
	var out []api.Condition
	for _, t := range types {
		out = append(out, api.Condition{Type: t, Status: api.ConditionTrue})
	}
	return out
}

// running is a control plane whose four components run version and are rolled out.
func running(version string) observed {
	o := observed{
		infra:      &api.Infra{Ready: true, Endpoint: api.Endpoint{Host: "127.0.0.1", Port: 6443}},
		pki:        &api.ClusterPKI{Ready: true, Kubeconfigs: map[string][]byte{"admin": []byte("sealed")}},
		components: map[string]*api.ControlPlaneComponent{},
	}
	for _, n := range components {
		o.components[n] = component(n, version, 1, 1, ready(api.ConditionAvailable, api.ConditionRolloutComplete)...)
		o.componentKeys = append(o.componentKeys, "demo."+n)
	}
	return o
}

func TestComputeStatus_AggregatesEachCondition(t *testing.T) {
	type want struct {
		typ    string
		status api.ConditionStatus
		reason string
		msg    string
	}
	tests := []struct {
		name    string
		cluster func() *api.Cluster
		obs     func() observed
		want    []want
	}{
		{
			name:    "nothing reported yet",
			cluster: func() *api.Cluster { return newCluster("1.34.4") },
			obs:     func() observed { return observed{} },
			want: []want{
				{api.ConditionValidConfiguration, api.ConditionTrue, ReasonAsExpected, ""},
				{api.ConditionInfrastructureReady, api.ConditionFalse, ReasonWaitingForInfrastructure, "waiting for infrad"},
				{api.ConditionPKIReady, api.ConditionFalse, ReasonWaitingForInfrastructure, "once the infrastructure is ready"},
				{api.ConditionAvailable, api.ConditionFalse, ReasonWaitingForInfrastructure, "waiting for etcd"},
				{api.ConditionProgressing, api.ConditionTrue, ReasonProvisioning, "etcd is not created yet"},
				{api.ConditionDegraded, api.ConditionFalse, ReasonAsExpected, ""},
				{api.ConditionIgnitionEndpointAvailable, api.ConditionFalse, ReasonWaitingForIgnition, "waiting for ignitiond"},
			},
		},
		{
			name:    "infrastructure ready, waiting for pkid",
			cluster: func() *api.Cluster { return newCluster("1.34.4") },
			obs: func() observed {
				return observed{infra: &api.Infra{Ready: true, Endpoint: api.Endpoint{Host: "10.0.0.1", Port: 6443}}}
			},
			want: []want{
				{api.ConditionInfrastructureReady, api.ConditionTrue, ReasonAsExpected, "10.0.0.1:6443"},
				{api.ConditionPKIReady, api.ConditionFalse, ReasonWaitingForPKI, "waiting for pkid"},
				{api.ConditionAvailable, api.ConditionFalse, ReasonWaitingForPKI, "once pkid has issued"},
			},
		},
		{
			name:    "kube-apiserver not ready",
			cluster: func() *api.Cluster { return newCluster("1.34.4") },
			obs: func() observed {
				o := running("1.34.4")
				o.components[api.ComponentKubeAPIServer] = component(api.ComponentKubeAPIServer, "1.34.4", 0, 1,
					api.Condition{Type: api.ConditionAvailable, Status: api.ConditionFalse, Reason: "ProbeFailing", Message: "/readyz: connection refused"})
				return o
			},
			want: []want{
				{api.ConditionEtcdAvailable, api.ConditionTrue, ReasonAsExpected, "1/1 replicas ready"},
				{api.ConditionKubeAPIServerAvailable, api.ConditionFalse, "ProbeFailing", "waiting for kube-apiserver: 0/1 replicas ready: /readyz: connection refused"},
				{api.ConditionAvailable, api.ConditionFalse, ReasonComponentUnavailable, "waiting for kube-apiserver: 0/1 replicas ready"},
				{api.ConditionProgressing, api.ConditionTrue, ReasonProvisioning, "kube-apiserver is rolling out (0/1 replicas ready)"},
			},
		},
		{
			name:    "all available",
			cluster: func() *api.Cluster { return newCluster("1.34.4") },
			obs:     func() observed { return running("1.34.4") },
			want: []want{
				{api.ConditionAvailable, api.ConditionTrue, ReasonAsExpected, "available at 127.0.0.1:6443"},
				{api.ConditionEtcdAvailable, api.ConditionTrue, ReasonAsExpected, ""},
				{api.ConditionKubeAPIServerAvailable, api.ConditionTrue, ReasonAsExpected, ""},
				{api.ConditionProgressing, api.ConditionFalse, ReasonAsExpected, "runs 1.34.4"},
			},
		},
		{
			name:    "etcd reporting its own version counts as rolled out",
			cluster: func() *api.Cluster { return newCluster("1.34.4") },
			obs: func() observed {
				o := running("1.34.4")
				o.components[api.ComponentEtcd] = component(api.ComponentEtcd, "v3.6.16", 1, 1, ready(api.ConditionAvailable, api.ConditionRolloutComplete)...)
				return o
			},
			want: []want{{api.ConditionProgressing, api.ConditionFalse, ReasonAsExpected, ""}},
		},
		{
			name:    "a component has not observed its generation",
			cluster: func() *api.Cluster { return newCluster("1.34.4") },
			obs: func() observed {
				o := running("1.34.4")
				o.components[api.ComponentScheduler].Generation = 2
				return o
			},
			want: []want{
				{api.ConditionAvailable, api.ConditionTrue, ReasonAsExpected, ""},
				{api.ConditionProgressing, api.ConditionTrue, ReasonProvisioning, "kube-scheduler has not observed generation 2"},
			},
		},
		{
			name:    "degraded component",
			cluster: func() *api.Cluster { return newCluster("1.34.4") },
			obs: func() observed {
				o := running("1.34.4")
				o.components[api.ComponentControllerManager].Status.Conditions.Set(api.Condition{
					Type: api.ConditionDegraded, Status: api.ConditionTrue, Message: "restarted 5 times"}, time.Now())
				return o
			},
			want: []want{{api.ConditionDegraded, api.ConditionTrue, ReasonComponentDegraded, "kube-controller-manager is degraded: restarted 5 times"}},
		},
		{
			name: "deleting",
			cluster: func() *api.Cluster {
				c := newCluster("1.34.4")
				now := time.Now()
				c.DeletionTimestamp = &now
				return c
			},
			obs: func() observed { return running("1.34.4") },
			want: []want{{api.ConditionDeleting, api.ConditionTrue, ReasonWaitingForCleanup,
				"waiting for componentd to stop 4 components (etcd, kube-apiserver, kube-controller-manager, kube-scheduler); " +
					"waiting for infrad to release the infrastructure; waiting for pkid to remove the certificates"}},
		},
		{
			name: "deleting with node pools left",
			cluster: func() *api.Cluster {
				c := newCluster("1.34.4")
				now := time.Now()
				c.DeletionTimestamp = &now
				return c
			},
			obs: func() observed {
				o := running("1.34.4")
				o.nodePools = []string{"demo.workers", "demo.gpu"}
				o.ignitionKeys = []string{"demo", "demo.gpu", "demo.workers"}
				return o
			},
			want: []want{{api.ConditionDeleting, api.ConditionTrue, ReasonWaitingForCleanup,
				"waiting for 2 node pools to be deleted (gpu, workers); waiting for ignitiond to remove 3 ignition records; " +
					"waiting for componentd to stop 4 components"}},
		},
		{
			name: "deleting a node pool that says what it waits for",
			cluster: func() *api.Cluster {
				c := newCluster("1.34.4")
				now := time.Now()
				c.DeletionTimestamp = &now
				return c
			},
			obs: func() observed {
				o := running("1.34.4")
				o.nodePools = []string{"demo.workers", "demo.gpu"}
				o.nodePoolWaits = map[string]string{"demo.workers": "waiting for 1 machines to go: w-1 (Deleting)"}
				return o
			},
			want: []want{{api.ConditionDeleting, api.ConditionTrue, ReasonWaitingForCleanup,
				"waiting for 2 node pools to be deleted (gpu, workers: waiting for 1 machines to go: w-1 (Deleting)); " +
					"waiting for componentd to stop 4 components"}},
		},
		{
			name: "deleting the Cluster API objects",
			cluster: func() *api.Cluster {
				c := newCluster("1.34.4")
				now := time.Now()
				c.DeletionTimestamp = &now
				return c
			},
			obs: func() observed {
				return observed{management: "waiting for Cluster API to delete the Cluster hostplane-demo/demo"}
			},
			want: []want{{api.ConditionDeleting, api.ConditionTrue, ReasonWaitingForCleanup,
				"waiting for Cluster API to delete the Cluster hostplane-demo/demo"}},
		},
		{
			name:    "ignition server not ready yet",
			cluster: func() *api.Cluster { return newCluster("1.34.4") },
			obs: func() observed {
				o := running("1.34.4")
				o.ignition = &api.IgnitionServer{Endpoint: "127.0.0.1:7443", Message: "waiting for the ignition-server certificate"}
				return o
			},
			want: []want{
				{api.ConditionIgnitionEndpointAvailable, api.ConditionFalse, ReasonWaitingForIgnition, "waiting for the ignition-server certificate"},
				{api.ConditionAvailable, api.ConditionTrue, ReasonAsExpected, ""},
			},
		},
		{
			name:    "ignition server ready",
			cluster: func() *api.Cluster { return newCluster("1.34.4") },
			obs: func() observed {
				o := running("1.34.4")
				o.ignition = &api.IgnitionServer{Endpoint: "127.0.0.1:7443", Ready: true}
				return o
			},
			want: []want{{api.ConditionIgnitionEndpointAvailable, api.ConditionTrue, ReasonAsExpected, "https://127.0.0.1:7443"}},
		},
		{
			name: "a release gone from the catalogue",
			cluster: func() *api.Cluster {
				c := newCluster("1.34.4")
				c.Spec.Release.Version = "1.29.0"
				return c
			},
			obs:  func() observed { return observed{} },
			want: []want{{api.ConditionValidConfiguration, api.ConditionFalse, ReasonInvalidConfiguration, "spec.release.version: unknown release"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.cluster()
			computeStatus(c, tt.obs(), time.Now())
			for _, w := range tt.want {
				got, ok := c.Status.Conditions.Get(w.typ)
				if !ok {
					t.Fatalf("no %s condition", w.typ)
				}
				if got.Status != w.status || got.Reason != w.reason || !strings.Contains(got.Message, w.msg) || got.ObservedGeneration != c.Generation {
					t.Errorf("%s = %s/%s %q (gen %d), want %s/%s containing %q", w.typ, got.Status, got.Reason, got.Message,
						got.ObservedGeneration, w.status, w.reason, w.msg)
				}
			}
		})
	}
}

func TestComputeStatus_EndpointAndKubeconfigFollowInfraAndPKI(t *testing.T) {
	c := newCluster("1.34.4")
	computeStatus(c, running("1.34.4"), time.Now())
	if ep := c.Status.ControlPlaneEndpoint; ep == nil || *ep != (api.Endpoint{Host: "127.0.0.1", Port: 6443}) {
		t.Fatalf("endpoint %+v", ep)
	}
	if !c.Status.KubeconfigAvailable || c.Status.ObservedGeneration != 1 {
		t.Fatalf("status %+v", c.Status)
	}
	computeStatus(c, observed{}, time.Now())
	if c.Status.ControlPlaneEndpoint != nil || c.Status.KubeconfigAvailable {
		t.Fatalf("endpoint or kubeconfig kept after infra and pki went: %+v", c.Status)
	}
}

func TestComputeStatus_VersionHistoryTracksUpgrade(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := newCluster("1.33.13")

	ch := computeStatus(c, observed{}, t0)
	h := c.Status.Version.History
	if c.Status.Version.Desired.Version != "1.33.13" || len(h) != 1 || h[0].State != UpdatePartial || !h[0].StartedTime.Equal(t0) || h[0].CompletionTime != nil {
		t.Fatalf("initial history %+v", c.Status.Version)
	}
	if ch.firstAvailable {
		t.Fatal("firstAvailable before anything runs")
	}

	t1 := t0.Add(time.Minute)
	ch = computeStatus(c, running("1.33.13"), t1)
	h = c.Status.Version.History
	if h[0].State != UpdateCompleted || h[0].CompletionTime == nil || !h[0].CompletionTime.Equal(t1) || !ch.firstAvailable {
		t.Fatalf("after rollout %+v firstAvailable=%v", h, ch.firstAvailable)
	}
	if again := computeStatus(c, running("1.33.13"), t1.Add(time.Minute)); again.conditions || again.firstAvailable {
		t.Fatalf("an unchanged world changed the status: %+v", again)
	}

	// Upgrade: spec moves to 1.34.4; components still run 1.33.13.
	t2 := t1.Add(time.Hour)
	c.Spec.Release.Version = "1.34.4"
	c.Generation = 2
	computeStatus(c, running("1.33.13"), t2)
	h = c.Status.Version.History
	if len(h) != 2 || h[0].Version != "1.34.4" || h[0].State != UpdatePartial || !h[0].StartedTime.Equal(t2) || h[1].State != UpdateCompleted {
		t.Fatalf("upgrade history %+v", h)
	}
	prog, _ := c.Status.Conditions.Get(api.ConditionProgressing)
	if prog.Status != api.ConditionTrue || prog.Reason != ReasonUpgrading || !strings.Contains(prog.Message, "kube-apiserver runs 1.33.13") {
		t.Fatalf("progressing %+v", prog)
	}

	t3 := t2.Add(time.Minute)
	o := running("1.34.4")
	o.components[api.ComponentEtcd] = component(api.ComponentEtcd, "3.6.16", 1, 1, ready(api.ConditionAvailable, api.ConditionRolloutComplete)...)
	ch = computeStatus(c, o, t3)
	h = c.Status.Version.History
	if h[0].State != UpdateCompleted || !h[0].CompletionTime.Equal(t3) || ch.firstAvailable {
		t.Fatalf("completed upgrade %+v firstAvailable=%v", h, ch.firstAvailable)
	}
}

func TestComputeStatus_IgnitionEndpointFollowsTheReadyIgnitionServer(t *testing.T) {
	c := newCluster("1.34.4")
	o := running("1.34.4")
	o.ignition = &api.IgnitionServer{Endpoint: "127.0.0.1:7443", Ready: true}
	computeStatus(c, o, time.Now())
	if c.Status.IgnitionEndpoint != "127.0.0.1:7443" {
		t.Fatalf("ignition endpoint %q", c.Status.IgnitionEndpoint)
	}
	o.ignition.Ready = false
	computeStatus(c, o, time.Now())
	if c.Status.IgnitionEndpoint != "" {
		t.Fatalf("ignition endpoint %q kept while the server is not ready", c.Status.IgnitionEndpoint)
	}
}
