// Package dockercloud runs machines as containers on the local Docker engine, as Cluster
// API's Docker provider and kind run nodes: each machine is a container of the node image
// (tools/node-image: Debian with systemd as PID 1, containerd, runc and Ignition, nothing of
// Hostplane's but a first-boot unit) that boots the userdata it is given with Ignition and
// so becomes a real kubelet node. It answers the same calls as the local cloud's client
// (create, get, list, delete, power, faults), so that infrad's machine provider can run
// either.
//
// A machine is the container <Prefix><cluster>-<name> (hostname <name>, so its Node is
// <name>), labelled with its cluster, pool, provider ID and instance type; its containerd
// state is the volume <container>-containerd (containerd's overlayfs snapshotter needs a
// real file system under it). Its userdata is copied into the container before it first
// starts, and a power-off leaves a marker file in it: the cloud keeps no state of its own,
// Docker's is the whole truth. The instance type's CPU and memory are the container's
// limits. Delete leaves nothing: no container, volume, or cgroup of the node's pods (which
// live under /hostplane/<name> in the host's hierarchies).
//
// It drives Docker through its CLI, as kind does: the one Docker client every host that
// runs Docker has.
package dockercloud

import (
	"archive/tar"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/cgroups"
	"github.com/hostplane/hostplane/pkg/ignition"
	"github.com/hostplane/hostplane/services/localcloud"
)

const (
	// DefaultImage is the node image make node-image builds.
	DefaultImage = "hostplane-node:latest"
	// UserDataPath is where the node image's first boot reads its userdata.
	UserDataPath = "/etc/hostplane/userdata.ign"
	// powerOffMarker, in a machine's container, says Power stopped it.
	powerOffMarker = "/etc/hostplane/powered-off"
	// DefaultPrefix starts every container name of the cloud.
	DefaultPrefix = "hostplane-"

	// Labels of a machine's container.
	LabelCluster    = "dev.hostplane.cluster"
	LabelMachine    = "dev.hostplane.machine"
	LabelNodePool   = "dev.hostplane.nodepool"
	LabelProviderID = "dev.hostplane.provider-id"
	LabelType       = "dev.hostplane.instance-type"
	LabelZone       = "dev.hostplane.zone"
	LabelCapacity   = "dev.hostplane.capacity-type"
)

// RunFlags run systemd, containerd and a kubelet in a container on a Docker that refuses
// --privileged (CAP_SYS_RESOURCE outside its bounding set): every other capability, no
// seccomp or AppArmor profile, writable /proc and /sys paths, /dev/kmsg for the kubelet,
// the host's cgroups, tmpfs /run and /tmp as systemd wants them.
var RunFlags = []string{
	"--cap-add=ALL", "--cap-drop=SYS_RESOURCE",
	"--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined", "--security-opt", "systempaths=unconfined",
	"--device", "/dev/kmsg", "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw", "--tmpfs", "/run", "--tmpfs", "/tmp", "-e", "container=docker",
}

var (
	// ErrNoDocker: the Docker CLI is missing or its engine does not answer.
	ErrNoDocker = errors.New("dockercloud: no Docker engine")
	// ErrNoImage: the node image is not built.
	ErrNoImage = errors.New("dockercloud: no node image")
	// ErrUnsupported: what the docker cloud does not do (yet); it is errors.ErrUnsupported.
	ErrUnsupported = fmt.Errorf("dockercloud: %w", errors.ErrUnsupported)
)

// Cloud is the Docker engine's machines. The zero value is not usable: New sets defaults.
type Cloud struct {
	// Docker is the docker CLI (default: docker on PATH); Image the node image
	// (DefaultImage); Network the Docker network machines join ("" is Docker's default
	// bridge); Prefix starts container names (DefaultPrefix).
	Docker, Image, Network, Prefix string
}

// New is c with defaults for what it leaves empty.
func New(c Cloud) *Cloud {
	c.Docker = cmp.Or(c.Docker, "docker")
	c.Image = cmp.Or(c.Image, DefaultImage)
	c.Prefix = cmp.Or(c.Prefix, DefaultPrefix)
	return &c
}

func (c *Cloud) container(cluster, name string) string { return c.Prefix + cluster + "-" + name }
func volume(container string) string                   { return container + "-containerd" }

// docker runs the CLI; an engine that does not answer is ErrNoDocker.
func (c *Cloud) docker(ctx context.Context, args ...string) (string, error) {
	return c.dockerIn(ctx, nil, args...)
}

// dockerIn is docker with stdin.
func (c *Cloud) dockerIn(ctx context.Context, stdin []byte, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, c.Docker, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		var ee *exec.ExitError
		if !errors.As(err, &ee) || strings.Contains(msg, "Cannot connect to the Docker daemon") || strings.Contains(msg, "permission denied while trying to connect") {
			return "", fmt.Errorf("%w (%s %s): %v %s; is Docker installed and running?", ErrNoDocker, c.Docker, args[0], err, msg)
		}
		return stdout.String(), fmt.Errorf("docker %s: %v: %s", args[0], err, msg)
	}
	return stdout.String(), nil
}

// Check says whether the engine answers and the node image is there, and how to fix it.
func (c *Cloud) Check(ctx context.Context) error {
	if _, err := c.docker(ctx, "version", "--format", "{{.Server.Version}}"); err != nil {
		return err
	}
	if _, err := c.docker(ctx, "image", "inspect", "--format", "{{.Id}}", c.Image); err != nil {
		if errors.Is(err, ErrNoDocker) {
			return err
		}
		return fmt.Errorf("%w: Docker has no image %s; build it with `make node-image` (about 1.5 minutes, cached under ~/.cache/hostplane/node-image)", ErrNoImage, c.Image)
	}
	return nil
}

// Create starts machine spec.Name of spec.Cluster booting spec.UserData, or reports the
// machine when it exists already.
func (c *Cloud) Create(ctx context.Context, spec localcloud.MachineSpec) (localcloud.MachineStatus, error) {
	if spec.Cluster == "" || spec.Name == "" || len(spec.UserData) == 0 {
		return localcloud.MachineStatus{}, fmt.Errorf("%w: a machine needs a cluster, a name and userdata", localcloud.ErrInvalid)
	}
	it, ok := api.LocalInstanceType(spec.InstanceType)
	if !ok {
		return localcloud.MachineStatus{}, fmt.Errorf("%w: instance type %q is not one of %s", localcloud.ErrInvalid, spec.InstanceType, api.LocalInstanceTypeNames())
	}
	if it.Architecture != runtime.GOARCH {
		return localcloud.MachineStatus{}, fmt.Errorf("%w: instance type %s is %s; this host's containers are %s", localcloud.ErrInvalid, it.Name, it.Architecture, runtime.GOARCH)
	}
	if st, err := c.Get(ctx, spec.Cluster, spec.Name); !errors.Is(err, localcloud.ErrNotFound) {
		return st, err
	}
	if err := c.Check(ctx); err != nil {
		return localcloud.MachineStatus{}, err
	}
	zone := spec.Zone
	if zone == "" && len(it.Zones) > 0 {
		zone = it.Zones[0]
	}
	name := c.container(spec.Cluster, spec.Name)
	args := []string{"create", "--name", name, "--hostname", spec.Name,
		"--label", LabelCluster + "=" + spec.Cluster, "--label", LabelMachine + "=" + spec.Name,
		"--label", LabelNodePool + "=" + spec.NodePool, "--label", LabelProviderID + "=" + spec.ProviderID,
		"--label", LabelType + "=" + it.Name, "--label", LabelZone + "=" + zone,
		"--label", LabelCapacity + "=" + cmp.Or(spec.CapacityType, api.CapacityTypeOnDemand)}
	args = append(args, limits(it)...)
	if c.Network != "" {
		args = append(args, "--network", c.Network)
	}
	args = append(args, RunFlags...)
	args = append(args, "-v", volume(name)+":/var/lib/containerd", c.Image)
	_, err := c.docker(ctx, args...)
	if err == nil {
		err = c.copyIn(ctx, name, UserDataPath, spec.UserData)
	}
	if err == nil {
		_, err = c.docker(ctx, "start", name)
	}
	if err != nil {
		// A half-made machine (the name taken, the volume made) is undone, so the next
		// attempt starts clean.
		_ = c.remove(context.WithoutCancel(ctx), spec.Cluster, spec.Name)
		return localcloud.MachineStatus{}, err
	}
	return c.Get(ctx, spec.Cluster, spec.Name)
}

// copyIn writes data (mode 0600) to path in container, running or not, making the path's
// directory (mode 0755) if it lacks it: docker cp of a tar archive of that directory and the
// file into the directory's parent.
func (c *Cloud) copyIn(ctx context.Context, container, path string, data []byte) error {
	dir := filepath.Dir(path)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: filepath.Base(dir) + "/", Mode: 0o755, ModTime: now}); err != nil {
		return err
	}
	name := filepath.Base(dir) + "/" + filepath.Base(path)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o600, Size: int64(len(data)), ModTime: now}); err != nil {
		return err
	}
	if _, err := tw.Write(data); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	_, err := c.dockerIn(ctx, buf.Bytes(), "cp", "-", container+":"+filepath.Dir(dir))
	return err
}

// exists says whether path is in container, running or not.
func (c *Cloud) exists(ctx context.Context, container, path string) bool {
	_, err := c.docker(ctx, "cp", container+":"+path, "-")
	return err == nil
}

// limits are the docker run flags of instance type it: its cores (at most the host's) and
// memory.
func limits(it api.InstanceType) []string {
	var out []string
	if cpu := min(int(it.CPU), runtime.NumCPU()); cpu > 0 {
		out = append(out, "--cpus", strconv.Itoa(cpu))
	}
	if q, err := resource.ParseQuantity(it.Memory); err == nil && q.Value() > 0 {
		out = append(out, "--memory", strconv.FormatInt(q.Value(), 10))
	}
	return out
}

// inspected is what docker inspect says of a machine's container.
type inspected struct {
	Name   string `json:"Name"`
	Config struct {
		Hostname string            `json:"Hostname"`
		Labels   map[string]string `json:"Labels"`
	} `json:"Config"`
	State struct {
		Status   string `json:"Status"`
		Running  bool   `json:"Running"`
		ExitCode int    `json:"ExitCode"`
	} `json:"State"`
	Created      time.Time `json:"Created"`
	RestartCount int       `json:"RestartCount"`
}

// Get reports machine name of cluster.
func (c *Cloud) Get(ctx context.Context, cluster, name string) (localcloud.MachineStatus, error) {
	out, err := c.docker(ctx, "container", "inspect", c.container(cluster, name))
	if err != nil {
		if !errors.Is(err, ErrNoDocker) && strings.Contains(err.Error(), "No such container") {
			return localcloud.MachineStatus{}, fmt.Errorf("%w: %s/%s", localcloud.ErrNotFound, cluster, name)
		}
		return localcloud.MachineStatus{}, err
	}
	var ins []inspected
	if err := json.Unmarshal([]byte(out), &ins); err != nil || len(ins) != 1 {
		return localcloud.MachineStatus{}, fmt.Errorf("docker container inspect %s: %d answers, %v", c.container(cluster, name), len(ins), err)
	}
	return c.status(ctx, ins[0]), nil
}

// status is the machine's report from its container: Booting while Ignition and TLS
// bootstrap run, Running once the kubelet has its kubeconfig (it registered its Node),
// Stopped when the container is not running (PoweredOff when Power stopped it).
func (c *Cloud) status(ctx context.Context, in inspected) localcloud.MachineStatus {
	l := in.Config.Labels
	st := localcloud.MachineStatus{
		Cluster: l[LabelCluster], Name: l[LabelMachine], NodePool: l[LabelNodePool], ProviderID: l[LabelProviderID],
		InstanceType: l[LabelType], Zone: l[LabelZone], CapacityType: l[LabelCapacity], CreatedAt: in.Created,
		Boots: 1 + in.RestartCount,
	}
	switch {
	case !in.State.Running:
		st.State = localcloud.StateStopped
		st.PoweredOff = c.exists(ctx, strings.TrimPrefix(in.Name, "/"), powerOffMarker)
		st.Message = fmt.Sprintf("the container is %s (exit code %d)", in.State.Status, in.State.ExitCode)
		if st.PoweredOff {
			st.Message = "powered off"
		}
	case c.joined(ctx, in.Name):
		st.State, st.NodeName = localcloud.StateRunning, in.Config.Hostname
	default:
		st.State = localcloud.StateBooting
	}
	return st
}

// joined says whether the kubelet in container has its kubeconfig: TLS bootstrap got it a
// certificate, so it registered its Node.
func (c *Cloud) joined(ctx context.Context, container string) bool {
	_, err := c.docker(ctx, "exec", strings.TrimPrefix(container, "/"), "test", "-s", ignition.PathKubeletKubeconfig)
	return err == nil
}

// List reports every machine of cluster.
func (c *Cloud) List(ctx context.Context, cluster string) ([]localcloud.MachineStatus, error) {
	out, err := c.docker(ctx, "container", "ls", "-a", "-q", "--filter", "label="+LabelCluster+"="+cluster)
	if err != nil {
		return nil, err
	}
	ids := strings.Fields(out)
	if len(ids) == 0 {
		return nil, nil
	}
	out, err = c.docker(ctx, append([]string{"container", "inspect"}, ids...)...)
	if err != nil {
		return nil, err
	}
	var ins []inspected
	if err := json.Unmarshal([]byte(out), &ins); err != nil {
		return nil, fmt.Errorf("docker container inspect: %w", err)
	}
	sts := make([]localcloud.MachineStatus, 0, len(ins))
	for _, in := range ins {
		sts = append(sts, c.status(ctx, in))
	}
	return sts, nil
}

// Delete removes machine name of cluster and everything it left on the host.
func (c *Cloud) Delete(ctx context.Context, cluster, name string) error {
	if _, err := c.Get(ctx, cluster, name); err != nil {
		return err
	}
	return c.remove(ctx, cluster, name)
}

// remove removes the container, its volume and its pods' cgroups, whichever exist.
func (c *Cloud) remove(ctx context.Context, cluster, name string) error {
	ctr := c.container(cluster, name)
	var errs []error
	if _, err := c.docker(ctx, "rm", "-f", "-v", ctr); err != nil && !strings.Contains(err.Error(), "No such container") {
		errs = append(errs, err)
	}
	if _, err := c.docker(ctx, "volume", "rm", "-f", volume(ctr)); err != nil {
		errs = append(errs, err)
	}
	if err := cgroups.RemoveEverywhere(filepath.Join(ignition.CgroupRootPrefix, name)); err != nil {
		errs = append(errs, fmt.Errorf("cgroups of %s: %w", name, err))
	}
	return errors.Join(errs...)
}

// Power stops machine name (on false: its disk, credentials and Node name stay) or starts
// it again.
func (c *Cloud) Power(ctx context.Context, cluster, name string, on bool) (localcloud.MachineStatus, error) {
	if _, err := c.Get(ctx, cluster, name); err != nil {
		return localcloud.MachineStatus{}, err
	}
	ctr := c.container(cluster, name)
	if on {
		if _, err := c.docker(ctx, "start", ctr); err != nil {
			return localcloud.MachineStatus{}, err
		}
		// Running again: a later stop is a crash unless Power stops it.
		if _, err := c.docker(ctx, "exec", ctr, "rm", "-f", powerOffMarker); err != nil {
			return localcloud.MachineStatus{}, err
		}
	} else {
		if err := c.copyIn(ctx, ctr, powerOffMarker, nil); err != nil {
			return localcloud.MachineStatus{}, err
		}
		if _, err := c.docker(ctx, "stop", "-t", "30", ctr); err != nil {
			return localcloud.MachineStatus{}, err
		}
	}
	return c.Get(ctx, cluster, name)
}

// Fault injects fault into machine name: Crash kills its container (no shutdown, as a
// power cut), StopHeartbeats stops its kubelet. FailNextBoot is not supported.
func (c *Cloud) Fault(ctx context.Context, cluster, name, fault string) (localcloud.MachineStatus, error) {
	if _, err := c.Get(ctx, cluster, name); err != nil {
		return localcloud.MachineStatus{}, err
	}
	ctr := c.container(cluster, name)
	var err error
	switch fault {
	case api.FaultCrash:
		_, err = c.docker(ctx, "kill", ctr)
	case api.FaultStopHeartbeats:
		_, err = c.docker(ctx, "exec", ctr, "systemctl", "stop", ignition.UnitKubelet)
	case api.FaultFailNextBoot:
		return localcloud.MachineStatus{}, fmt.Errorf("%w: fault %s on a docker machine", ErrUnsupported, fault)
	default:
		return localcloud.MachineStatus{}, fmt.Errorf("%w: %q", localcloud.ErrUnknownFault, fault)
	}
	if err != nil {
		return localcloud.MachineStatus{}, err
	}
	st, err := c.Get(ctx, cluster, name)
	st.Fault = fault
	return st, err
}

// Reconfigure would apply new userdata to a running machine (an InPlace update): not yet.
func (c *Cloud) Reconfigure(context.Context, string, string, []byte) (localcloud.MachineStatus, error) {
	return localcloud.MachineStatus{}, fmt.Errorf("%w: InPlace updates of docker machines (use upgradeType Replace)", ErrUnsupported)
}
