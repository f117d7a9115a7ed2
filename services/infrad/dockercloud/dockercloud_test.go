package dockercloud_test

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/testenv"
	"github.com/hostplane/hostplane/services/infrad/dockercloud"
	"github.com/hostplane/hostplane/services/infrad/provider"
	"github.com/hostplane/hostplane/services/localcloud"
)

// The machine provider runs a docker cloud as it runs the local cloud's client.
var _ provider.Cloud = (*dockercloud.Cloud)(nil)

// probeUserData is an Ignition config (spec 3.3.0, what the node image's Ignition 2.14
// reads) that writes one file: the machine booted its userdata when the file is there.
const probeUserData = `{"ignition":{"version":"3.3.0"},"storage":{"files":[{"path":"/etc/hostplane-probe","contents":{"source":"data:,booted"},"mode":420}]}}`

func newCloud(t *testing.T) *dockercloud.Cloud {
	t.Helper()
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	c := dockercloud.New(dockercloud.Cloud{Prefix: "hostplane-test-" + hex.EncodeToString(b) + "-"})
	if err := c.Check(t.Context()); err != nil {
		t.Fatalf("%v (make test builds the node image first)", err)
	}
	t.Cleanup(func() {
		// What a test left (its machines' containers and named volumes) goes, as Delete would.
		out, _ := exec.Command("docker", "ps", "-a", "-q", "--filter", "name="+c.Prefix).Output()
		for _, id := range strings.Fields(string(out)) {
			_ = exec.Command("docker", "rm", "-f", "-v", id).Run()
		}
		out, _ = exec.Command("docker", "volume", "ls", "-q", "--filter", "name="+c.Prefix).Output()
		for _, v := range strings.Fields(string(out)) {
			_ = exec.Command("docker", "volume", "rm", "-f", v).Run()
		}
	})
	return c
}

func dockerOut(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %v: %v: %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// probeFile is the probe file's contents in the machine's container ("" when absent).
func probeFile(c *dockercloud.Cloud, cluster, name string) string {
	out, err := exec.Command("docker", "exec", c.Prefix+cluster+"-"+name, "cat", "/etc/hostplane-probe").Output()
	if err != nil {
		return ""
	}
	return string(out)
}

// A machine is a container of the node image that boots its userdata with Ignition, has its
// instance type's limits, survives a power cycle with its disk, stops on a crash, and leaves
// nothing behind when deleted.
func TestDockerCloud_AMachineBootsItsUserdataAndLeavesNothingWhenDeleted(t *testing.T) {
	c := newCloud(t)
	ctx := t.Context()
	const cl, name = "c1", "pool-a-1"
	st, err := c.Create(ctx, localcloud.MachineSpec{Cluster: cl, Name: name, NodePool: "pool-a", ProviderID: api.ProviderID(cl, name),
		UserData: []byte(probeUserData), InstanceType: "local.medium"})
	if err != nil {
		t.Fatal(err)
	}
	if st.State != localcloud.StateBooting || st.Name != name || st.NodePool != "pool-a" || st.InstanceType != "local.medium" || st.ProviderID != api.ProviderID(cl, name) {
		t.Errorf("created machine reports %+v, want a Booting local.medium machine of pool-a", st)
	}
	// Create again is the same machine, not a second one.
	if again, err := c.Create(ctx, localcloud.MachineSpec{Cluster: cl, Name: name, UserData: []byte(probeUserData)}); err != nil || !again.CreatedAt.Equal(st.CreatedAt) {
		t.Errorf("second create: %+v %v, want the first machine", again, err)
	}
	ctr := c.Prefix + cl + "-" + name
	testenv.Eventually(t, time.Minute, func() bool { return probeFile(c, cl, name) == "booted" },
		"the machine never applied its userdata: %s", dockerOut(t, "logs", "--tail", "20", ctr))
	if h := dockerOut(t, "inspect", "--format", "{{.Config.Hostname}} {{.HostConfig.Memory}}", ctr); h != name+" 8589934592" {
		t.Errorf("hostname and memory limit %q, want %s and local.medium's 8Gi", h, name)
	}
	// A second machine of another cluster is not in this cluster's list.
	if _, err := c.Create(ctx, localcloud.MachineSpec{Cluster: "c2", Name: "other", UserData: []byte(probeUserData)}); err != nil {
		t.Fatal(err)
	}
	if list, err := c.List(ctx, cl); err != nil || len(list) != 1 || list[0].Name != name {
		t.Errorf("List(%s) = %+v %v, want its one machine", cl, list, err)
	}

	// Power off keeps the disk; on, the machine comes back with it.
	if st, err = c.Power(ctx, cl, name, false); err != nil || st.State != localcloud.StateStopped || !st.PoweredOff {
		t.Fatalf("power off: %+v %v, want Stopped and powered off", st, err)
	}
	if st, err = c.Power(ctx, cl, name, true); err != nil || st.State == localcloud.StateStopped {
		t.Fatalf("power on: %+v %v", st, err)
	}
	testenv.Eventually(t, time.Minute, func() bool { return probeFile(c, cl, name) == "booted" }, "the machine lost its disk over a power cycle")

	// A crash stops it, and it is not powered off.
	if st, err = c.Fault(ctx, cl, name, api.FaultCrash); err != nil || st.State != localcloud.StateStopped || st.PoweredOff || st.Fault != api.FaultCrash {
		t.Errorf("crash: %+v %v, want Stopped by a fault", st, err)
	}
	if _, err := c.Fault(ctx, cl, name, "Meteor"); !errors.Is(err, localcloud.ErrUnknownFault) {
		t.Errorf("unknown fault: %v", err)
	}

	if err := c.Delete(ctx, cl, name); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, cl, name); !errors.Is(err, localcloud.ErrNotFound) {
		t.Errorf("after delete: %v, want not found", err)
	}
	if err := c.Delete(ctx, cl, name); !errors.Is(err, localcloud.ErrNotFound) {
		t.Errorf("second delete: %v, want not found", err)
	}
	if out := dockerOut(t, "volume", "ls", "-q", "--filter", "name="+ctr); out != "" {
		t.Errorf("volumes left: %s", out)
	}
}

// Bad input and a missing engine or image are clear errors, never a half-made machine.
func TestDockerCloud_BadInputAndMissingPiecesAreClearErrors(t *testing.T) {
	c := newCloud(t)
	ctx := t.Context()
	if _, err := c.Create(ctx, localcloud.MachineSpec{Cluster: "c", Name: "m"}); !errors.Is(err, localcloud.ErrInvalid) {
		t.Errorf("no userdata: %v, want invalid", err)
	}
	if _, err := c.Create(ctx, localcloud.MachineSpec{Cluster: "c", Name: "m", UserData: []byte("{}"), InstanceType: "huge-9000"}); !errors.Is(err, localcloud.ErrInvalid) || !strings.Contains(err.Error(), "local.medium") {
		t.Errorf("unknown instance type: %v, want invalid naming the types", err)
	}
	if _, err := c.Create(ctx, localcloud.MachineSpec{Cluster: "c", Name: "m", UserData: []byte("{}"), InstanceType: "local.arm.medium"}); !errors.Is(err, localcloud.ErrInvalid) || !strings.Contains(err.Error(), "arm64") {
		t.Errorf("an arm64 type on this host: %v, want invalid naming the architecture", err)
	}
	if _, err := c.Reconfigure(ctx, "c", "m", []byte("{}")); !errors.Is(err, dockercloud.ErrUnsupported) {
		t.Errorf("reconfigure: %v", err)
	}

	noImage := dockercloud.New(dockercloud.Cloud{Image: "hostplane-node:never-built", Prefix: c.Prefix})
	_, err := noImage.Create(ctx, localcloud.MachineSpec{Cluster: "c", Name: "m", UserData: []byte(probeUserData)})
	if !errors.Is(err, dockercloud.ErrNoImage) || !strings.Contains(err.Error(), "make node-image") {
		t.Errorf("no image: %v, want ErrNoImage saying how to build it", err)
	}
	noDocker := dockercloud.New(dockercloud.Cloud{Docker: filepath.Join(t.TempDir(), "docker"), Prefix: c.Prefix})
	if err := noDocker.Check(ctx); !errors.Is(err, dockercloud.ErrNoDocker) {
		t.Errorf("no docker CLI: %v, want ErrNoDocker", err)
	}
	if _, err := noDocker.Get(ctx, "c", "m"); !errors.Is(err, dockercloud.ErrNoDocker) {
		t.Errorf("get without docker: %v, want ErrNoDocker (not: not found)", err)
	}
	if out := dockerOut(t, "ps", "-a", "-q", "--filter", "name="+c.Prefix); out != "" {
		t.Errorf("containers left by refused creates: %s", out)
	}
}
