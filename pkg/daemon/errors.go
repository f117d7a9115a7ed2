package daemon

import "errors"

// ErrNoTokens is returned by New for a standalone daemon (flags parsed by Flags) whose admin
// API would have no access control: no Auth, tokens file or admin token, and no
// --insecure-no-auth.
var ErrNoTokens = errors.New("the admin API needs tokens: set HOSTPLANE_TOKENS_FILE or HOSTPLANE_ADMIN_TOKEN, or pass --insecure-no-auth to serve it without access control")

// ErrStandby is what Ready reports of a replica that stands by while another one leads: it
// is ready (healthy) but serves nothing but its health, and /leaderz answers 503 (the gateway
// routes to the replica whose /leaderz answers 200).
var ErrStandby = errors.New("standing by")
