package api

import (
	"encoding/json"
	"time"
)

// ClusterConfiguration is HyperShift's spec.configuration: settings of the control plane's
// components. Only the kube-apiserver's audit log is configurable so far.
type ClusterConfiguration struct {
	APIServer *APIServerConfiguration `json:"apiServer,omitempty"`
}

// APIServerConfiguration configures kube-apiserver (HyperShift's configv1.APIServerSpec).
type APIServerConfiguration struct {
	Audit *Audit `json:"audit,omitempty"`
}

// Audit selects kube-apiserver's audit policy profile and the retention of its audit log
// files. Zero values mean the defaults (DefaultAudit).
type Audit struct {
	// Profile is one of the Audit* profiles (HyperShift's names); default AuditDefault.
	Profile string `json:"profile,omitempty"`
	// MaxAgeDays is how many days a rotated audit log file is kept (--audit-log-maxage).
	MaxAgeDays int `json:"maxAgeDays,omitempty"`
	// MaxBackups is how many rotated audit log files a replica keeps (--audit-log-maxbackup).
	MaxBackups int `json:"maxBackups,omitempty"`
	// MaxSizeMB is the size at which an audit log file is rotated (--audit-log-maxsize).
	MaxSizeMB int `json:"maxSizeMB,omitempty"`
}

// Audit profiles (OpenShift's and HyperShift's names).
const (
	// AuditDefault logs the metadata of every request, no bodies.
	AuditDefault = "Default"
	// AuditWriteRequestBodies also logs the request bodies of writes.
	AuditWriteRequestBodies = "WriteRequestBodies"
	// AuditAllRequestBodies also logs the bodies of reads.
	AuditAllRequestBodies = "AllRequestBodies"
	// AuditNone logs nothing.
	AuditNone = "None"
)

// AuditProfiles lists the audit profiles.
var AuditProfiles = []string{AuditDefault, AuditWriteRequestBodies, AuditAllRequestBodies, AuditNone}

// Audit retention defaults and bounds. With the defaults a kube-apiserver replica keeps at
// most (1 + 3) × 100 MB of audit log, none of it older than 7 days once rotated.
const (
	DefaultAuditMaxAgeDays = 7
	DefaultAuditMaxBackups = 3
	DefaultAuditMaxSizeMB  = 100
	MaxAuditMaxAgeDays     = 366
	MaxAuditMaxBackups     = 100
	MaxAuditMaxSizeMB      = 1024
)

// DefaultAudit is the audit configuration of a cluster that sets none.
func DefaultAudit() Audit {
	return Audit{Profile: AuditDefault, MaxAgeDays: DefaultAuditMaxAgeDays, MaxBackups: DefaultAuditMaxBackups, MaxSizeMB: DefaultAuditMaxSizeMB}
}

// WithDefaults returns a with its zero fields filled from DefaultAudit.
func (a Audit) WithDefaults() Audit {
	d := DefaultAudit()
	if a.Profile == "" {
		a.Profile = d.Profile
	}
	if a.MaxAgeDays == 0 {
		a.MaxAgeDays = d.MaxAgeDays
	}
	if a.MaxBackups == 0 {
		a.MaxBackups = d.MaxBackups
	}
	if a.MaxSizeMB == 0 {
		a.MaxSizeMB = d.MaxSizeMB
	}
	return a
}

// EffectiveAudit is the audit configuration kube-apiserver runs with: the spec's
// spec.configuration.apiServer.audit with defaults for what it leaves out.
func (s *ClusterSpec) EffectiveAudit() Audit {
	if s.Configuration == nil || s.Configuration.APIServer == nil || s.Configuration.APIServer.Audit == nil {
		return DefaultAudit()
	}
	return s.Configuration.APIServer.Audit.WithDefaults()
}

// AuditEvent is one kube-apiserver audit event: the members of audit.k8s.io/v1 Event that
// GET /v1/clusters/{cluster}/audit returns, under the same JSON names.
type AuditEvent struct {
	AuditID    string    `json:"auditID"`
	Stage      string    `json:"stage"`
	Level      string    `json:"level"`
	Verb       string    `json:"verb"`
	RequestURI string    `json:"requestURI"`
	User       AuditUser `json:"user"`
	// ImpersonatedUser is the user the request acted as, when it impersonated one.
	ImpersonatedUser *AuditUser      `json:"impersonatedUser,omitempty"`
	SourceIPs        []string        `json:"sourceIPs,omitempty"`
	UserAgent        string          `json:"userAgent,omitempty"`
	ObjectRef        *AuditObjectRef `json:"objectRef,omitempty"`
	ResponseStatus   *AuditStatus    `json:"responseStatus,omitempty"`
	// RequestObject is the request's body (levels Request and RequestResponse), as sent.
	RequestObject json.RawMessage `json:"requestObject,omitempty"`
	// ResponseObject is the answer's body (level RequestResponse).
	ResponseObject           json.RawMessage   `json:"responseObject,omitempty"`
	RequestReceivedTimestamp time.Time         `json:"requestReceivedTimestamp"`
	StageTimestamp           time.Time         `json:"stageTimestamp"`
	Annotations              map[string]string `json:"annotations,omitempty"`
}

// AuditUser is who sent a request (authentication.k8s.io/v1 UserInfo).
type AuditUser struct {
	Username string              `json:"username,omitempty"`
	UID      string              `json:"uid,omitempty"`
	Groups   []string            `json:"groups,omitempty"`
	Extra    map[string][]string `json:"extra,omitempty"`
}

// AuditObjectRef is the object a request was about.
type AuditObjectRef struct {
	Resource        string `json:"resource,omitempty"`
	Namespace       string `json:"namespace,omitempty"`
	Name            string `json:"name,omitempty"`
	UID             string `json:"uid,omitempty"`
	APIGroup        string `json:"apiGroup,omitempty"`
	APIVersion      string `json:"apiVersion,omitempty"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
	Subresource     string `json:"subresource,omitempty"`
}

// AuditStatus is the outcome of a request (the members of meta/v1 Status an audit event
// carries).
type AuditStatus struct {
	Code    int    `json:"code,omitempty"`
	Status  string `json:"status,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// AuditEventList is the answer of GET /v1/clusters/{cluster}/audit: the newest events that
// match the query, oldest first.
type AuditEventList struct {
	Items []AuditEvent `json:"items"`
}

// Limits of GET /v1/clusters/{cluster}/audit's limit query parameter.
const (
	DefaultAuditLimit = 100
	MaxAuditLimit     = 1000
)
