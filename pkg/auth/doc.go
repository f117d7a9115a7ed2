// Package auth is access control for hostplane's HTTP API: bearer tokens with a role and an
// optional set of clusters they are scoped to.
//
// Roles:
//
//   - viewer may read: GET and HEAD, except the routes that hand out secrets.
//   - admin may do everything.
//
// Routes that hand out or change secrets — GET /v1/clusters/{cluster}/kubeconfig, every
// route under /v1/clusters/{cluster}/pki, a node pool's userdata
// (/v1/clusters/{cluster}/nodepools/{nodepool}/userdata: its Ignition token), and GET
// /v1/clusters/{cluster}/audit, whose request bodies may carry what a viewer must not read —
// need admin even for GET.
//
// A token with clusters is scoped: it reaches only the routes of those clusters (the
// {cluster} path segment of /v1/clusters/{cluster}/...). The middleware cannot see the name in
// a request body, so a scoped token may not create clusters (POST /v1/clusters) nor write any
// other route that names no cluster; it may list clusters, and clusterd lists only the
// clusters in its scope (see Allowed).
//
// /healthz, /readyz, /openapi.json, /ignition/{cluster} (a machine's Ignition token, which
// ignitiond checks) and the web console's static files (/ui and below) are open; /metrics is
// open unless Config.MetricsRequireAuth is set, then any valid token may scrape it. Every
// other path, unknown ones included, needs a valid token: authentication comes before routing, so an
// anonymous caller learns nothing about which routes or clusters exist.
//
// Answers: 401 application/problem+json with WWW-Authenticate: Bearer without a token or with
// an unknown one, 403 problem outside the role or the scope. Tokens are compared in constant
// time (over SHA-256 digests, so the length of a token leaks nothing either).
//
// Tokens come from a file (YAML or JSON, a list of {token, role, clusters, name}) named by
// HOSTPLANE_TOKENS_FILE and/or one admin token in HOSTPLANE_ADMIN_TOKEN; see Load.
package auth
