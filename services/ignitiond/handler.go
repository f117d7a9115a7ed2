package ignitiond

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/hostplane/hostplane/pkg/ignition"
)

// Paths of a cluster's Ignition listener: nothing else is served there.
const (
	PathIgnition = "/ignition"
	PathHealthz  = "/healthz"
)

// handler is cluster's listener: GET /ignition, the releases' node binaries and /healthz.
func (d *Daemon) handler(cluster string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+PathIgnition, func(w http.ResponseWriter, r *http.Request) { d.serveIgnition(w, r, cluster) })
	mux.HandleFunc("GET "+PathNodeBinary, func(w http.ResponseWriter, r *http.Request) { d.serveNodeBinary(w, r, cluster) })
	mux.HandleFunc("GET "+PathHealthz, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}

// PathGatewayIgnition is the admin router's Ignition route, for machines that reach
// hostplane through the API gateway instead of the cluster's own HTTPS listener. The API's
// access control leaves it open (pkg/auth): the node pool's Ignition token is checked here.
const PathGatewayIgnition = "/ignition/{cluster}"

// routes registers the gateway's Ignition route on the admin router.
func (d *Daemon) routes(r chi.Router) {
	r.With(d.Started).Get(PathGatewayIgnition, d.serveGatewayIgnition)
}

// serveGatewayIgnition answers GET /ignition/{cluster} of the admin router for the cluster the
// path names.
func (d *Daemon) serveGatewayIgnition(w http.ResponseWriter, r *http.Request) {
	d.serveIgnition(w, r, chi.URLParam(r, "cluster"))
}

// serveIgnition answers a machine's GET /ignition: the payload of its bearer token's hash,
// or 401 with an empty body for anything but a valid token of this cluster.
func (d *Daemon) serveIgnition(w http.ResponseWriter, r *http.Request, cluster string) {
	start := time.Now()
	outcome := OutcomeError
	defer func() {
		d.metrics.requests.WithLabelValues(outcome).Inc()
		d.metrics.duration.Observe(time.Since(start).Seconds())
	}()
	log := d.log.With("cluster", cluster, "remote", r.RemoteAddr)
	w.Header().Set("Cache-Control", "no-store")

	ref, result, ok := d.authenticate(r, cluster)
	if !ok {
		return
	}
	d.metrics.tokens.WithLabelValues(result).Inc()
	if result != TokenCurrent && result != TokenPrevious {
		outcome = OutcomeUnauthorized
		log.Debug("refused an Ignition request", "token", result)
		unauthorized(w)
		return
	}
	log = log.With("nodepool", ref.nodepool, "hash", ref.token.ConfigHash)
	body, err := d.payload(r.Context(), ref)
	switch {
	case errors.Is(err, ErrPoolGone):
		outcome = OutcomeUnauthorized
		unauthorized(w)
		return
	case errors.Is(err, ErrNoNodeBinary):
		outcome = OutcomeNoNodeBinary
		log.Error("a real node's payload needs a node binary this host does not have; the machine will ask again", "err", err)
		w.Header().Set("Retry-After", "10")
		http.Error(w, "the release's node binaries are not built on this Ignition server yet", http.StatusServiceUnavailable)
		return
	case errors.Is(err, ignition.ErrInvalidPayload):
		outcome = OutcomeInvalidConfig
		log.Error("the rendered Ignition config is invalid; not serving it", "err", err)
		http.Error(w, "", http.StatusInternalServerError)
		return
	case err != nil:
		log.Error("render the Ignition config", "err", err)
		http.Error(w, "", http.StatusInternalServerError)
		return
	}
	body, _, err = ignition.Negotiate(body, r.Header.Get("Accept"))
	if err != nil {
		outcome = OutcomeNotAcceptable
		log.Warn("the machine's Ignition cannot read its config", "accept", r.Header.Get("Accept"), "err", err)
		http.Error(w, err.Error(), http.StatusNotAcceptable)
		return
	}
	outcome = OutcomeServed
	w.Header().Set("Content-Type", ignition.MediaType)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
	log.Debug("served Ignition", "token", result)
}

// authenticate looks up the request's bearer token among cluster's (once the index has read
// every record): the token's ref and how the lookup went (TokenCurrent and TokenPrevious
// are valid). ok is false when the request went away while the index was syncing.
func (d *Daemon) authenticate(r *http.Request, cluster string) (tokenRef, string, bool) {
	tok, ok := bearer(r.Header.Values("Authorization"))
	if !ok {
		return tokenRef{}, TokenMalformed, true
	}
	select {
	case <-d.index.synced:
	case <-r.Context().Done():
		return tokenRef{}, "", false
	}
	ref, result := d.index.lookup(cluster, tok, d.cfg.Clock.Now())
	return ref, result, true
}

// unauthorized answers 401 with an empty body: nothing says why.
func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", "Bearer")
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusUnauthorized)
}
