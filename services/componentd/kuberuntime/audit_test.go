package kuberuntime

import (
	"slices"
	"strings"
	"testing"

	"github.com/hostplane/hostplane/pkg/api"
)

func TestRender_KubeAPIServerAuditsToItsVolumeUnderTheMountedPolicy(t *testing.T) {
	in, _ := testInputs(t, "aud", api.SingleReplica, "1.34.4")
	in.Audit = api.Audit{Profile: api.AuditWriteRequestBodies, MaxBackups: 5}
	o := mustRender(t, in)
	var policy string
	for _, s := range o.Secrets {
		if *s.Name == SecretAuditPolicy {
			policy = string(s.Data[KeyAuditPolicy])
		}
	}
	if !strings.Contains(policy, "kind: Policy") || !strings.Contains(policy, "level: Request\n") {
		t.Fatalf("no WriteRequestBodies policy in Secret %s:\n%s", SecretAuditPolicy, policy)
	}
	for _, d := range o.Deployments {
		pod := d.Spec.Template.Spec
		c := pod.Containers[0]
		audited := slices.Contains(c.Args, "--audit-log-path="+AuditLogPath)
		if audited != (*d.Name == api.ComponentKubeAPIServer) {
			t.Errorf("%s: audit flags = %v", *d.Name, audited)
		}
		if !audited {
			continue
		}
		for _, want := range []string{"--audit-policy-file=/etc/hostplane/" + SecretAuditPolicy + "/" + KeyAuditPolicy,
			"--audit-log-format=json", "--audit-log-maxage=7", "--audit-log-maxbackup=5", "--audit-log-maxsize=100"} {
			if !slices.Contains(c.Args, want) {
				t.Errorf("kube-apiserver lacks %s: %v", want, c.Args)
			}
		}
		mounts := map[string]string{}
		for _, m := range c.VolumeMounts {
			mounts[*m.Name] = *m.MountPath
		}
		if mounts[AuditVolume] != "/var/log/kubernetes/audit" || mounts[SecretAuditPolicy] != "/etc/hostplane/"+SecretAuditPolicy {
			t.Errorf("kube-apiserver mounts %v", mounts)
		}
		for _, v := range pod.Volumes {
			if *v.Name == AuditVolume && v.EmptyDir == nil {
				t.Errorf("volume %s is not an emptyDir", AuditVolume)
			}
		}
	}
}

func TestRender_AChangedAuditProfileOrRetentionRollsOnlyKubeAPIServer(t *testing.T) {
	in, _ := testInputs(t, "aud", api.SingleReplica, "1.34.4")
	base := mustRender(t, in)
	in.Audit = api.DefaultAudit()
	if explicit := mustRender(t, in); explicit.ConfigHashes[api.ComponentKubeAPIServer] != base.ConfigHashes[api.ComponentKubeAPIServer] {
		t.Error("the explicit default audit configuration rolls kube-apiserver")
	}
	for _, a := range []api.Audit{{Profile: api.AuditNone}, {Profile: api.AuditAllRequestBodies}, {MaxSizeMB: 10}} {
		in.Audit = a
		changed := mustRender(t, in)
		for _, c := range Components() {
			rolled := base.ConfigHashes[c] != changed.ConfigHashes[c]
			if rolled != (c == api.ComponentKubeAPIServer) {
				t.Errorf("audit %+v: %s rolled = %v", a, c, rolled)
			}
		}
	}
	in.Audit = api.Audit{Profile: "Verbose"}
	if _, err := Render(in); err == nil {
		t.Error("Render with an unknown audit profile: no error")
	}
}
