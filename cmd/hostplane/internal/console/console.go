// Package console is hostplane's web console: a small static bundle (HTML, CSS and vanilla
// JavaScript, embedded; no CDN, no build step) served at /ui by `hostplane gateway` and by
// `hostplane dev`'s front door. The page is static and open; everything it shows comes from
// the public API (/v1), which it calls with the bearer token the user signs in with (kept in
// the tab's sessionStorage). It reads the event stream with fetch, since EventSource cannot
// send the Authorization header.
package console

import (
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
	"net/url"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/hostplane/hostplane/pkg/auth"
)

// Path is where the console is served; Path+"/" and below are its files. The front door's
// access control leaves it open (auth.PathConsole).
const Path = auth.PathConsole

//go:embed static
var static embed.FS

// Config configures the console.
type Config struct {
	// GrafanaURL is the base URL of a Grafana that has the dashboards of deploy/grafana
	// (e.g. "http://grafana:3000"); the console links into them. Empty hides the links.
	GrafanaURL string
}

// Validate checks the Grafana URL.
func (c Config) Validate() error {
	if c.GrafanaURL == "" {
		return nil
	}
	u, err := url.Parse(c.GrafanaURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return &url.Error{Op: "parse", URL: c.GrafanaURL, Err: errBadGrafanaURL}
	}
	return nil
}

type consoleError string

func (e consoleError) Error() string { return string(e) }

const errBadGrafanaURL = consoleError("the Grafana URL must be http(s)://host[:port][/path]")

// settings is what the page reads from /ui/config.json.
type settings struct {
	GrafanaURL string `json:"grafanaURL,omitempty"`
}

// Mount serves the console on r at Path: Path redirects to Path+"/", Path+"/config.json"
// tells the page its settings, and every other path below serves the embedded files.
func Mount(r chi.Router, cfg Config) {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded directory exists
	}
	conf, _ := json.Marshal(settings{GrafanaURL: strings.TrimRight(cfg.GrafanaURL, "/")})
	files := http.StripPrefix(Path+"/", http.FileServerFS(sub))
	r.Get(Path, func(w http.ResponseWriter, req *http.Request) {
		http.Redirect(w, req, Path+"/", http.StatusMovedPermanently)
	})
	r.Get(Path+"/config.json", func(w http.ResponseWriter, _ *http.Request) {
		secure(w.Header())
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-cache")
		_, _ = w.Write(conf)
	})
	r.Get(Path+"/*", func(w http.ResponseWriter, req *http.Request) {
		secure(w.Header())
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, req)
	})
}

// secure sets the headers that keep the page to its own files: scripts, styles and API calls
// from this origin only, never framed.
func secure(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; object-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
}
