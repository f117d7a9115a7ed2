package localcloud

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/testenv"
	lct "github.com/hostplane/hostplane/services/localcloud/localcloudtest"
)

// startCloud runs a Cloud on dir, listening on listen, until the test ends or stop is called.
func startCloud(t *testing.T, dir, listen string) (c *Cloud, cl *Client, stop func()) {
	t.Helper()
	c, err := New(Config{Dir: dir, Listen: listen, HeartbeatInterval: 200 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))})
	if err != nil {
		t.Fatal(err)
	}
	_, stop = testenv.Run(t, "localcloud", c.Run)
	select {
	case <-c.Ready():
	case <-time.After(time.Minute):
		t.Fatal("local cloud not listening")
	}
	cl, err = NewClient(c.URL())
	if err != nil {
		t.Fatal(err)
	}
	return c, cl, stop
}

// shortSocket is a unix socket path short enough for sun_path (t.TempDir paths may not be).
func shortSocket(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "lc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	return "unix://" + filepath.Join(d, "cloud.sock")
}

func TestCloud_ServesMachinesOverItsSocketAndKeepsThemAcrossARestart(t *testing.T) {
	ign := lct.NewIgnitionServer(t) // knows no token: every fetch is refused, the machine stays booting
	dir := t.TempDir()
	sock := shortSocket(t)
	c, cl, stop := startCloud(t, dir, sock)
	if got := c.URL(); got != sock {
		t.Fatalf("URL() = %q, want %q", got, sock)
	}
	if err := cl.Healthy(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	spec := MachineSpec{Cluster: "c1", Name: "np-a-1", NodePool: "np-a", UserData: ign.Stub(t, "unknown")}
	st, err := cl.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != StateBooting || st.ProviderID != api.ProviderID("c1", "np-a-1") || st.CreatedAt.IsZero() {
		t.Fatalf("created %+v, want Booting with the default providerID", st)
	}
	again, err := cl.Create(ctx, spec)
	if err != nil || !again.CreatedAt.Equal(st.CreatedAt) {
		t.Fatalf("Create again = %+v, %v; want the same machine", again, err)
	}
	testenv.Eventually(t, 30*time.Second, func() bool {
		st, err = cl.Get(ctx, "c1", "np-a-1")
		return err == nil && strings.Contains(st.Message, "401")
	}, "machine reports the refused Ignition fetch; last %+v, %v", st, err)
	if st.Boots != 1 {
		t.Errorf("Boots = %d while the one boot retries its fetch, want 1", st.Boots)
	}
	if _, err := cl.Create(ctx, MachineSpec{Cluster: "c2", Name: "other", UserData: ign.Stub(t, "x")}); err != nil {
		t.Fatal(err)
	}

	if _, err := cl.Get(ctx, "c1", "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get of an absent machine: %v, want ErrNotFound", err)
	}
	if _, err := cl.Create(ctx, MachineSpec{Cluster: "C_1", Name: "../x"}); !errors.Is(err, ErrInvalid) ||
		!strings.Contains(err.Error(), "cluster") || !strings.Contains(err.Error(), "userData") {
		t.Errorf("Create of a bad spec: %v, want ErrInvalid naming the fields", err)
	}
	if _, err := cl.Fault(ctx, "c1", "np-a-1", "Meteor"); !errors.Is(err, ErrUnknownFault) {
		t.Errorf("Fault Meteor: %v, want ErrUnknownFault", err)
	}
	if err := cl.do(ctx, "POST", "/machines/c1/np-a-1/fault", FaultRequest{Type: "Meteor"}, nil); !errors.Is(err, ErrUnknownFault) {
		t.Errorf("server answer to fault Meteor: %v, want ErrUnknownFault", err)
	}
	if _, err := cl.Fault(ctx, "c1", "nope", api.FaultCrash); !errors.Is(err, ErrNotFound) {
		t.Errorf("Fault of an absent machine: %v, want ErrNotFound", err)
	}
	if st, err = cl.Fault(ctx, "c1", "np-a-1", api.FaultStopHeartbeats); err != nil || st.Fault != api.FaultStopHeartbeats {
		t.Fatalf("Fault = %+v, %v", st, err)
	}
	all, err := cl.List(ctx, "")
	if err != nil || len(all) != 2 || all[0].Name != "np-a-1" || all[1].Name != "other" {
		t.Fatalf("List all = %+v, %v", all, err)
	}
	one, err := cl.List(ctx, "c2")
	if err != nil || len(one) != 1 || one[0].Cluster != "c2" {
		t.Fatalf("List c2 = %+v, %v", one, err)
	}

	stop()
	if _, err := cl.List(ctx, ""); err == nil {
		t.Fatal("List answered after the cloud stopped")
	}
	c2, cl, _ := startCloud(t, dir, sock)
	all, err = cl.List(ctx, "")
	if err != nil || len(all) != 2 {
		t.Fatalf("List after restart = %+v, %v", all, err)
	}
	st = all[0]
	if st.Name != "np-a-1" || st.NodePool != "np-a" || st.Fault != api.FaultStopHeartbeats || !st.CreatedAt.Equal(again.CreatedAt) {
		t.Errorf("after restart %+v; want the same machine with its fault", st)
	}
	testenv.Eventually(t, 30*time.Second, func() bool {
		st, err = cl.Get(ctx, "c1", "np-a-1")
		return err == nil && st.Boots == 2
	}, "the machine that had not joined boots again; last %+v, %v", st, err)

	if n, ok := testenv.Metric(t, c2.cfg.Registry, "localcloud_machines", map[string]string{"cluster": "c1", "state": StateBooting}); !ok || n != 1 {
		t.Errorf("localcloud_machines{cluster=c1,state=Booting} = %v, %v; want 1", n, ok)
	}
	if err := cl.Delete(ctx, "c1", "np-a-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Get(ctx, "c1", "np-a-1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after Delete: %v, want ErrNotFound", err)
	}
	if _, err := os.Stat(machineDir(dir, "c1", "np-a-1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("machine dir after Delete: %v, want it gone", err)
	}
	if err := cl.Delete(ctx, "c1", "np-a-1"); err != nil {
		t.Errorf("second Delete: %v, want nil", err)
	}
}

func TestCloud_ListensOnTCPAndAnswersProblems(t *testing.T) {
	c, cl, _ := startCloud(t, t.TempDir(), "127.0.0.1:0")
	if !strings.HasPrefix(c.URL(), "http://127.0.0.1:") {
		t.Fatalf("URL() = %q", c.URL())
	}
	_, err := cl.Get(t.Context(), "c", "m")
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != api.CodeNotFound || !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get = %v, want a not-found api.Error matching ErrNotFound", err)
	}
}

func TestFaults_CrashStopsForGoodAndFailNextBootFailsTheNextBoot(t *testing.T) {
	ign := lct.NewIgnitionServer(t)
	dir, sock := t.TempDir(), shortSocket(t)
	_, cl, stop := startCloud(t, dir, sock)
	ctx := t.Context()
	for _, n := range []string{"crash", "failboot"} {
		if _, err := cl.Create(ctx, MachineSpec{Cluster: "c", Name: n, UserData: ign.Stub(t, "unknown")}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := cl.Fault(ctx, "c", "crash", api.FaultCrash)
	if err != nil || st.State != StateStopped || st.Fault != api.FaultCrash {
		t.Fatalf("Crash = %+v, %v; want Stopped", st, err)
	}
	if st, err = cl.Fault(ctx, "c", "failboot", api.FaultFailNextBoot); err != nil || st.Fault != api.FaultFailNextBoot || st.State == StateFailed {
		t.Fatalf("FailNextBoot = %+v, %v; want it recorded, the boot under way untouched", st, err)
	}

	stop() // the machines restart with the cloud
	_, cl, _ = startCloud(t, dir, sock)
	testenv.Eventually(t, 30*time.Second, func() bool {
		st, err = cl.Get(ctx, "c", "failboot")
		return err == nil && st.State == StateFailed
	}, "the next boot fails; last %+v, %v", st, err)
	if st.Boots != 2 || !strings.Contains(st.Message, api.FaultFailNextBoot) {
		t.Errorf("failed boot %+v; want the second boot failed by the fault", st)
	}
	if st, err = cl.Get(ctx, "c", "crash"); err != nil || st.State != StateStopped || st.Boots != 1 {
		t.Errorf("crashed machine after restart %+v, %v; want it still Stopped, not booted again", st, err)
	}
}

func TestCreate_OfAMachineStillBootingWithNewUserData_BootsWithTheNewStub(t *testing.T) {
	ign := lct.NewIgnitionServer(t)
	ign.Set(t, "fresh", lct.NodePayload(t, []byte(testKubeconfig), ign.CAPEM,
		KubeletConfig{ConfigHash: "h-fresh", KubeletVersion: "v1.34.4"}))
	_, cl, _ := startCloud(t, t.TempDir(), shortSocket(t))
	ctx := t.Context()
	spec := MachineSpec{Cluster: "c", Name: "m", UserData: ign.Stub(t, "rotated-away")}
	if _, err := cl.Create(ctx, spec); err != nil {
		t.Fatal(err)
	}
	var st MachineStatus
	var err error
	testenv.Eventually(t, 30*time.Second, func() bool {
		st, err = cl.Get(ctx, "c", "m")
		return err == nil && strings.Contains(st.Message, "401")
	}, "the stale token is refused; last %+v, %v", st, err)

	spec.UserData = ign.Stub(t, "fresh") // infrad hands over the rotated token
	if _, err := cl.Create(ctx, spec); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func() bool {
		st, err = cl.Get(ctx, "c", "m")
		return err == nil && st.ConfigHash == "h-fresh"
	}, "the machine fetched its config with the new stub; last %+v, %v", st, err)
}

func TestCloud_PlacesAPoolsMachinesOverItsTypesZonesAndRefusesAnUnknownType(t *testing.T) {
	ign := lct.NewIgnitionServer(t)
	_, cl, _ := startCloud(t, t.TempDir(), shortSocket(t))
	ctx := t.Context()
	types, err := cl.InstanceTypes(ctx)
	if err != nil || len(types) != len(api.LocalInstanceTypes()) {
		t.Fatalf("InstanceTypes = %v, %v; want the catalogue", types, err)
	}
	small, _ := api.LocalInstanceType("local.small")
	zones := map[string]int{}
	for _, n := range []string{"np-1", "np-2", "np-3", "np-4"} {
		st, err := cl.Create(ctx, MachineSpec{Cluster: "c1", Name: n, NodePool: "np", UserData: ign.Stub(t, "x"), InstanceType: small.Name})
		if err != nil {
			t.Fatal(err)
		}
		if st.InstanceType != small.Name || st.CapacityType != api.CapacityTypeOnDemand {
			t.Errorf("machine %s: %+v", n, st)
		}
		zones[st.Zone]++
	}
	for i, z := range small.Zones {
		if want := map[bool]int{true: 2, false: 1}[i == 0]; zones[z] != want {
			t.Errorf("zones %v: want 4 machines spread over %v, the first zone twice", zones, small.Zones)
		}
	}
	st, err := cl.Create(ctx, MachineSpec{Cluster: "c1", Name: "other-1", NodePool: "other", UserData: ign.Stub(t, "x")})
	if err != nil || st.InstanceType != api.DefaultInstanceType || st.Zone != small.Zones[0] {
		t.Errorf("a machine of another pool with no type: %+v, %v; want %s in the first zone", st, err, api.DefaultInstanceType)
	}
	_, err = cl.Create(ctx, MachineSpec{Cluster: "c1", Name: "bad", UserData: ign.Stub(t, "x"), InstanceType: "local.huge"})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "local.small") {
		t.Errorf("an unknown type: %v, want ErrInvalid naming the valid types", err)
	}
	_, err = cl.Create(ctx, MachineSpec{Cluster: "c1", Name: "bad", UserData: ign.Stub(t, "x"), InstanceType: "local.arm.medium", Zone: "local-c"})
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("a zone the type is not offered in: %v, want ErrInvalid", err)
	}
}

// A powered-off machine stays off across a cloud restart and boots again once powered on;
// a crashed one is not powered on.
func TestPower_OffStaysOffAcrossARestartAndOnResumesButACrashStays(t *testing.T) {
	ign := lct.NewIgnitionServer(t)
	dir, sock := t.TempDir(), shortSocket(t)
	_, cl, stop := startCloud(t, dir, sock)
	ctx := t.Context()
	for _, n := range []string{"sleeper", "crashed"} {
		if _, err := cl.Create(ctx, MachineSpec{Cluster: "c", Name: n, UserData: ign.Stub(t, "unknown")}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cl.Fault(ctx, "c", "crashed", api.FaultCrash); err != nil {
		t.Fatal(err)
	}
	st, err := cl.Power(ctx, "c", "sleeper", false)
	if err != nil || st.State != StateStopped || !st.PoweredOff {
		t.Fatalf("power off = %+v, %v; want Stopped and powered off", st, err)
	}
	if st, err := cl.Power(ctx, "c", "crashed", false); err != nil || st.PoweredOff || st.Fault != api.FaultCrash {
		t.Fatalf("power off of a crashed machine = %+v, %v; want it left crashed", st, err)
	}

	stop()
	_, cl, _ = startCloud(t, dir, sock)
	if st, err := cl.Get(ctx, "c", "sleeper"); err != nil || st.State != StateStopped || !st.PoweredOff || st.Boots != 1 {
		t.Fatalf("after a restart %+v, %v; want still powered off, not booted again", st, err)
	}
	if st, err = cl.Power(ctx, "c", "sleeper", true); err != nil || st.PoweredOff {
		t.Fatalf("power on = %+v, %v", st, err)
	}
	testenv.Eventually(t, 30*time.Second, func() bool {
		st, err = cl.Get(ctx, "c", "sleeper")
		return err == nil && st.Boots == 2 && st.State != StateStopped
	}, "the powered-on machine never booted again; last %+v, %v", st, err)
	if st, err := cl.Power(ctx, "c", "crashed", true); err != nil || st.State != StateStopped || st.Fault != api.FaultCrash {
		t.Errorf("power on of a crashed machine = %+v, %v; want it still crashed", st, err)
	}
	if _, err := cl.Power(ctx, "c", "nope", true); !errors.Is(err, ErrNotFound) {
		t.Errorf("power on of an unknown machine: %v, want ErrNotFound", err)
	}
}
