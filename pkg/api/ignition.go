package api

import "time"

// IgnitionServer is ignitiond's per-cluster HTTPS Ignition server (bucket "ignition", key =
// cluster name). It listens on the cluster's Infra.Ignition endpoint with the cluster's
// "ignition-server" certificate (CertIgnitionServer, signed by root-ca).
type IgnitionServer struct {
	ObjectMeta
	// Endpoint is "host:port"; clusterd reports it as status.ignitionEndpoint.
	Endpoint string `json:"endpoint"`
	// CertSerial is the PKI serial of the certificate it serves.
	CertSerial string `json:"certSerial,omitempty"`
	Ready      bool   `json:"ready"`
	Message    string `json:"message,omitempty"`
}

// IgnitionTokens is the token record of one NodePool (bucket "ignition", key
// "<cluster>.<nodepool>"); ignitiond is its only writer.
//
// Current serves the pool's current config hash. A token is rotated at half its lifetime, and
// a new config hash mints a new Current: either way the replaced token moves to Previous and
// stays valid until PreviousValidUntil (the grace period), so machines booting during a
// rotation or a rollout still get a payload (the one of the hash that token was minted for).
type IgnitionTokens struct {
	ObjectMeta
	Cluster  string `json:"cluster"`
	NodePool string `json:"nodePool"`
	// NodePoolGeneration is the NodePool generation this record was last reconciled for.
	NodePoolGeneration int64          `json:"nodePoolGeneration"`
	Current            IgnitionToken  `json:"current"`
	Previous           *IgnitionToken `json:"previous,omitempty"`
	// UserData is the Ignition stub a machine boots with (JSON: a config whose
	// ignition.config.merge points at https://<endpoint>/ignition with
	// "Authorization: Bearer <Current.Token>" and whose ignition.security.tls trusts the
	// cluster's root CA). nodepoold copies it into the userdata Secret of Current.ConfigHash.
	UserData []byte `json:"userData,omitempty"`
	// BootstrapTokenID is the guest bootstrap token id of a record written before each
	// token had its own (IgnitionToken.BootstrapTokenID): its tokens' payloads carry it.
	BootstrapTokenID string `json:"bootstrapTokenID,omitempty"`
	Ready            bool   `json:"ready"`
	Message          string `json:"message,omitempty"`
}

// IgnitionToken is one token and what it serves.
type IgnitionToken struct {
	// Token is the bearer secret (32 random bytes, base64url).
	Token      string `json:"token"`
	ConfigHash string `json:"configHash"`
	// Release and Config are the hash inputs the token was minted for, so its payload can be
	// rebuilt after a restart even once the pool moved on.
	Release   string           `json:"release"`
	Config    []ConfigDocument `json:"config,omitempty"`
	IssuedAt  time.Time        `json:"issuedAt"`
	ExpiresAt time.Time        `json:"expiresAt"`
	// ValidUntil is set when the token was replaced: it stays valid until then (grace).
	ValidUntil *time.Time `json:"validUntil,omitempty"`
	// BootstrapTokenID is the id of the guest bootstrap token (kube-system Secret
	// bootstrap-token-<id>) this token's payload carries: minted with it, so it rotates with
	// it, and expiring a join window after this token stops being valid.
	BootstrapTokenID string `json:"bootstrapTokenID,omitempty"`
}

// BootstrapID is the guest bootstrap token id the payload of t, a token of r, carries.
func (r *IgnitionTokens) BootstrapID(t IgnitionToken) string {
	if t.BootstrapTokenID != "" {
		return t.BootstrapTokenID
	}
	return r.BootstrapTokenID
}
