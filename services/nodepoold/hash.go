package nodepoold

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/hostplane/hostplane/pkg/api"
)

// hashInputs are exactly the inputs of a pool that roll its machines: the kubelet release,
// the config documents (in order: later documents merge over earlier ones), the platform and
// its instance type (a pool on the default type hashes as it did before instance types).
// Labels, taints, replicas, autoscaling, timeouts and the management settings are not among
// them: they reach machines without replacing them.
type hashInputs struct {
	Release  string               `json:"release"`
	Config   []api.ConfigDocument `json:"config"`
	Platform string               `json:"platform"`
	// InstanceType is omitted for the default type, so pools created before instance types
	// existed keep their hash (and their machines).
	InstanceType string `json:"instanceType,omitempty"`
}

// ConfigHash is the hex sha256 of the pool spec's rolling inputs (hashInputs). A new hash
// means a new Ignition token and userdata Secret, so machines roll.
func ConfigHash(spec *api.NodePoolSpec) string {
	in := hashInputs{Release: spec.Release.Version, Config: spec.Config, Platform: spec.Platform.Type}
	if t := spec.Platform.InstanceType(); t != api.DefaultInstanceType {
		in.InstanceType = t
	}
	if in.Config == nil {
		in.Config = []api.ConfigDocument{} // no documents and an empty list are the same config
	}
	b, err := json.Marshal(in)
	if err != nil {
		panic("nodepoold: marshal hash inputs: " + err.Error()) // strings only: cannot fail
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
