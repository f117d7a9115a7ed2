package auth

import (
	"net/http"
	"strings"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/httpapi"
)

// Realm is the realm of the WWW-Authenticate challenge.
const Realm = "hostplane"

// Middleware authenticates and authorizes every request before it is routed (so unknown
// paths need a token too) and puts the principal in the request's context (FromContext). Use
// it in httpapi.Config.Middlewares.
func (a *Authenticator) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path := routePath(r)
		if a.open(path) {
			next.ServeHTTP(w, r)
			return
		}
		token, ok := bearer(r)
		if !ok {
			challenge(w, r, "", "this API needs a bearer token: send Authorization: Bearer <token>")
			return
		}
		p, ok := a.Authenticate(token)
		if !ok {
			challenge(w, r, "invalid_token", "the bearer token is not valid")
			return
		}
		if err := Authorize(p, r.Method, path); err != nil {
			httpapi.WriteProblem(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(NewContext(r.Context(), p)))
	})
}

// PathIgnitionPrefix starts the routes machines fetch Ignition configs from (GET
// /ignition/{cluster}); they are open to API tokens' access control.
const PathIgnitionPrefix = "/ignition/"

// PathConsole is where the web console is served (/ui and every path below it): static files
// only, open like /healthz; the API calls the page makes carry the user's bearer token.
const PathConsole = "/ui"

// open reports whether path needs no token.
func (a *Authenticator) open(path string) bool {
	switch path {
	case httpapi.PathHealthz, httpapi.PathReadyz, httpapi.PathLeaderz, httpapi.PathOpenAPI:
		return true
	case httpapi.PathMetrics:
		return !a.metricsAuth
	}
	if path == PathConsole || strings.HasPrefix(path, PathConsole+"/") {
		return true
	}
	// A machine's Ignition request carries its node pool's Ignition token, which ignitiond
	// checks itself; it is not an API token.
	return strings.HasPrefix(path, PathIgnitionPrefix)
}

// Authorize decides whether p may send method to path (a request path, not a pattern). It
// returns nil or a CodeForbidden *api.Error that says why.
func Authorize(p *Principal, method, path string) error {
	read := method == http.MethodGet || method == http.MethodHead
	cluster, secret := classify(path)
	switch {
	case p.Role == RoleMetrics && !(read && path == httpapi.PathMetrics):
		return api.Errorf(api.CodeForbidden, "token %q has role %s, which reads %s only", p.Name, p.Role, httpapi.PathMetrics)
	case !read && p.Role != RoleAdmin:
		return api.Errorf(api.CodeForbidden, "token %q has role %s, which may only read (GET); %s %s needs role admin", p.Name, p.Role, method, path)
	case secret && p.Role != RoleAdmin:
		return api.Errorf(api.CodeForbidden, "token %q has role %s; %s hands out or changes secrets and needs role admin", p.Name, p.Role, path)
	case componentLogs(path) && !p.Has(GrantLogs):
		return api.Errorf(api.CodeForbidden, "token %q has role %s without grant %q; component logs may hold what requests carried and need role admin or that grant", p.Name, p.Role, GrantLogs)
	case !p.Scoped():
		return nil
	case cluster != "":
		if !p.InScope(cluster) {
			return api.Errorf(api.CodeForbidden, "token %q is scoped to clusters %s, not %q", p.Name, strings.Join(p.Clusters, ", "), cluster)
		}
	case !read:
		return api.Errorf(api.CodeForbidden, "token %q is scoped to clusters %s; %s %s names no cluster (creating clusters needs an unscoped token)",
			p.Name, strings.Join(p.Clusters, ", "), method, path)
	}
	return nil
}

// classify returns the cluster a path names (/v1/clusters/{cluster}/...) and whether it is a
// secret-bearing route of that cluster (kubeconfig, pki and below, a node pool's userdata,
// and the audit log, which holds request bodies).
func classify(path string) (cluster string, secret bool) {
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	if len(segs) < 3 || segs[0] != "v1" || segs[1] != "clusters" || segs[2] == "" {
		return "", false
	}
	cluster = segs[2]
	if len(segs) > 3 {
		switch segs[3] {
		case "kubeconfig", "pki", "audit":
			secret = true
		case "nodepools":
			// A pool's userdata carries its Ignition token.
			secret = len(segs) > 5 && segs[5] == "userdata"
		}
	}
	return cluster, secret
}

// componentLogs reports whether path is a component's logs (/v1/clusters/{c}/components/{name}/logs).
func componentLogs(path string) bool {
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	return len(segs) == 6 && segs[0] == "v1" && segs[1] == "clusters" && segs[3] == "components" && segs[5] == "logs"
}

// routePath is the path chi routes on: the raw (still escaped) path when there is one, so
// that the cluster checked here is the {cluster} the handler sees.
func routePath(r *http.Request) string {
	if r.URL.RawPath != "" {
		return r.URL.RawPath
	}
	return r.URL.Path
}

// bearer extracts the token of an "Authorization: Bearer <token>" header.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// challenge answers 401 with a Bearer challenge (RFC 6750).
func challenge(w http.ResponseWriter, r *http.Request, errCode, detail string) {
	v := `Bearer realm="` + Realm + `"`
	if errCode != "" {
		v += `, error="` + errCode + `"`
	}
	w.Header().Set("WWW-Authenticate", v)
	httpapi.WriteProblem(w, r, api.Errorf(api.CodeUnauthenticated, "%s", detail))
}
