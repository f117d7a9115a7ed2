// Package mtls is the mutual TLS between hostplane's API gateway and the daemons' admin
// ports (the /v1 routes, /healthz, /readyz, /metrics).
//
// A management CA, made once by the bootstrap step (`hostplane credentials init
// --mgmt-tls-host …`, Generate), signs one server certificate per daemon and one client
// certificate for the gateway. A daemon given its certificate (ServerConfig) serves HTTPS
// only; given the CA as its client CA it asks every client for a certificate and answers
// the API only to one the CA signed for the gateway's name (ClientName), unless it is
// configured to accept direct calls (ServerConfig.AllowDirect). /healthz, /readyz, /metrics
// and /openapi.json stay open to a client without a certificate (the kubelet's probes,
// Prometheus scraping over TLS), still behind the daemon's bearer tokens where they apply.
// The gateway (ClientConfig) verifies each daemon's certificate with the CA and the host
// name of its backend URL and presents its own.
//
// Every certificate, key and CA file is read again when it changes on disk (checked at each
// handshake), so a rotated certificate takes effect at the next connection without a restart;
// a half-written pair (the key replaced, the certificate not yet) keeps the previous one in
// use.
package mtls
