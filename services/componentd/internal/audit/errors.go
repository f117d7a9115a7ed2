package audit

import "errors"

// ErrUnknownProfile reports an audit profile that is none of api.AuditProfiles.
var ErrUnknownProfile = errors.New("unknown audit profile")
