package localcloud

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/hostplane/hostplane/pkg/api"
)

// The layout of the state directory.
const (
	machinesDir    = "machines"           // Dir/machines/<cluster>/<name>/
	recordFile     = "machine.json"       // the machine's record
	kubeletKeyFile = "kubelet-client.key" // its kubelet client key (PEM), once joined
	kubeletCrtFile = "kubelet-client.crt" // its kubelet client certificate (PEM), once joined
	rootDir        = "root"               // the machine's own filesystem, written by Ignition
)

// record is what a machine keeps on disk (recordFile); its kubelet credentials sit beside it.
type record struct {
	Spec   MachineSpec   `json:"spec"`
	Status MachineStatus `json:"status"`
	// IP is the machine's InternalIP (a distinct loopback address).
	IP string `json:"ip"`
	// PendingUserData is the Ignition stub of an InPlace update not applied yet.
	PendingUserData []byte `json:"pendingUserData,omitempty"`
	// AppliedUserData is the sha256 of the stub the machine last applied in place.
	AppliedUserData string `json:"appliedUserData,omitempty"`
}

// machineDir is where a machine lives.
func machineDir(dir, cluster, name string) string {
	return filepath.Join(dir, machinesDir, cluster, name)
}

// loadRecords reads every machine record under dir. A record that cannot be read is skipped
// and reported in the returned error list (the rest still resume).
func loadRecords(dir string) ([]*record, []error) {
	var recs []*record
	var errs []error
	clusters, err := os.ReadDir(filepath.Join(dir, machinesDir))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, []error{fmt.Errorf("localcloud: read machines: %w", err)}
	}
	for _, cl := range clusters {
		if !cl.IsDir() {
			continue
		}
		names, err := os.ReadDir(filepath.Join(dir, machinesDir, cl.Name()))
		if err != nil {
			errs = append(errs, fmt.Errorf("localcloud: read cluster %s: %w", cl.Name(), err))
			continue
		}
		for _, n := range names {
			if !n.IsDir() {
				continue
			}
			path := filepath.Join(machineDir(dir, cl.Name(), n.Name()), recordFile)
			data, err := os.ReadFile(path)
			if err != nil {
				errs = append(errs, fmt.Errorf("localcloud: read %s: %w", path, err))
				continue
			}
			var rec record
			if err := json.Unmarshal(data, &rec); err != nil {
				errs = append(errs, fmt.Errorf("localcloud: decode %s: %w", path, err))
				continue
			}
			if rec.Spec.Cluster != cl.Name() || rec.Spec.Name != n.Name() {
				errs = append(errs, fmt.Errorf("localcloud: %s names machine %s/%s", path, rec.Spec.Cluster, rec.Spec.Name))
				continue
			}
			recs = append(recs, &rec)
		}
	}
	return recs, errs
}

// validateSpec checks a MachineSpec: the cluster is a DNS label and the name a DNS subdomain
// (it becomes a directory and the node's name), and there is userdata to boot with.
func validateSpec(s MachineSpec) error {
	var fe api.FieldErrors
	for _, msg := range validation.IsDNS1123Label(s.Cluster) {
		fe.Add("cluster", "%s", msg)
	}
	for _, msg := range validation.IsDNS1123Subdomain(s.Name) {
		fe.Add("name", "%s", msg)
	}
	if len(s.UserData) == 0 {
		fe.Add("userData", "required: the Ignition stub the machine boots with")
	}
	it, ok := api.LocalInstanceType(s.InstanceType)
	switch {
	case !ok:
		fe.Add("instanceType", "%q is not an instance type; use one of %s", s.InstanceType, api.LocalInstanceTypeNames())
	case s.Zone != "" && !slices.Contains(it.Zones, s.Zone):
		fe.Add("zone", "%q is not a zone of %s; use one of %s", s.Zone, it.Name, strings.Join(it.Zones, ", "))
	}
	switch s.CapacityType {
	case "", api.CapacityTypeOnDemand, api.CapacityTypeSpot:
	default:
		fe.Add("capacityType", "%q is not a capacity type; use %s or %s", s.CapacityType, api.CapacityTypeOnDemand, api.CapacityTypeSpot)
	}
	return fe.Err()
}

// machineIP gives a machine a distinct loopback address in 127.0.0.0/8 (never 127.0.0.x),
// derived from its cluster and name so it is stable across restarts.
func machineIP(cluster, name string) string {
	sum := sha256.Sum256([]byte(key(cluster, name)))
	v := binary.BigEndian.Uint32(sum[:4])
	return netip.AddrFrom4([4]byte{127, byte(1 + v%254), byte(v >> 8), byte(1 + (v>>16)%254)}).String()
}

// podIP gives a pod an address in 10.0.0.0/8 derived from its UID.
func podIP(uid string) string {
	sum := sha256.Sum256([]byte(uid))
	return netip.AddrFrom4([4]byte{10, sum[0], sum[1], 1 + sum[2]%254}).String()
}
