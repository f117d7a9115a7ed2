// Package natsauth is who may do what on hostplane's NATS: one identity per daemon, a
// bootstrap identity that lays out the shared streams and buckets, an admin identity for
// operators and tests, and identities for other systems (an inbox publisher, an event
// consumer). Every identity's permissions are generated from one table, Daemons, which says
// what each daemon's code does: the KV bucket it owns (read-write), the buckets it reads,
// the event resources it publishes, its durable consumers. Nothing is hand-maintained per
// deployment: hostplane dev's embedded server, the test environment and a generated
// nats-server configuration (ServerConfig) all come from the same table.
//
// # nkeys, not JWTs
//
// Identities are nkey users (an ed25519 key pair; the client proves it holds the seed by
// signing the server's nonce) listed with their permissions in the server's own options
// (server.Options.Nkeys, or an authorization block in nats-server.conf). The alternative,
// decentralised JWT auth (operator, account and user JWTs with a resolver), buys multi-tenant
// accounts and revocation without a server reload, at the price of an operator key, an
// account resolver and signed JWTs to distribute. Hostplane has one account and a handful of
// identities that change with its code, not with its users; the server's configuration is
// generated from this package in every deployment, so a reload is how permissions change.
// Seeds stay with their owner (mode 0600 files, or a Secret); the server only holds public
// keys.
//
// # Replies
//
// Each identity receives replies on its own inbox prefix, _INBOX_<identity>.> (ClientOptions
// sets it), and may subscribe nowhere else: no identity can read the replies another one
// gets (for example the pki bucket's values a direct get returns to pkid).
package natsauth
