package componentd

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/go-chi/chi/v5"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/httpapi"
	"github.com/hostplane/hostplane/services/componentd/internal/component"
	"github.com/hostplane/hostplane/services/componentd/kuberuntime"
)

// Log tail limits of GET .../components/{name}/logs.
const (
	DefaultLogTail = 100
	MaxLogTail     = 5000
	// maxLogWindow bounds how much of a log file is read to find its last lines.
	maxLogWindow = 16 << 20
)

func (d *Daemon) routes(r chi.Router) {
	// The process runtime's logs are files in the data dir (d.proc exists from New): they
	// answer before Run set up.
	r.Get("/v1/clusters/{cluster}/components/{name}/logs", httpapi.Handle(d.componentLogs))
	r = r.With(d.Started)
	r.Get("/v1/clusters/{cluster}/components", httpapi.Handle(d.listComponents))
	r.Get("/v1/clusters/{cluster}/audit", httpapi.Handle(d.auditEvents))
	r.Get("/v1/releases", httpapi.Handle(d.listReleases))
	r.Post("/v1/clusters/{cluster}/backups", httpapi.Handle(d.createBackup))
	r.Get("/v1/clusters/{cluster}/backups", httpapi.Handle(d.listBackups))
	r.Get("/v1/clusters/{cluster}/backups/{backup}", httpapi.Handle(d.getBackup))
	r.Delete("/v1/clusters/{cluster}/backups/{backup}", httpapi.Handle(d.deleteBackup))
	r.Post("/v1/clusters/{cluster}/backups/{backup}/restore", httpapi.Handle(d.restoreBackup))
	r.Delete("/v1/clusters/{cluster}/restore", httpapi.Handle(d.cancelRestore))
}

func clusterParam(r *http.Request) (string, error) {
	c := chi.URLParam(r, "cluster")
	if len(validation.IsDNS1123Label(c)) > 0 { // a cluster name is a DNS label, never a path
		return "", api.Errorf(api.CodeNotFound, "cluster %q not found", c)
	}
	return c, nil
}

// listComponents answers GET /v1/clusters/{cluster}/components with an api.ComponentList in
// dependency order.
func (d *Daemon) listComponents(w http.ResponseWriter, r *http.Request) error {
	cluster, err := clusterParam(r)
	if err != nil {
		return err
	}
	entries, err := d.components.List(r.Context(), api.ClusterPartsFilter(cluster))
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		return api.Errorf(api.CodeNotFound, "cluster %q has no control-plane components", cluster)
	}
	order := component.Names()
	list := api.ComponentList{Items: make([]api.ControlPlaneComponent, 0, len(entries))}
	for _, e := range entries {
		list.Items = append(list.Items, *e.Value)
	}
	slices.SortFunc(list.Items, func(a, b api.ControlPlaneComponent) int {
		return slices.Index(order, a.Name) - slices.Index(order, b.Name)
	})
	httpapi.WriteJSON(w, http.StatusOK, list)
	return nil
}

// componentLogs answers GET /v1/clusters/{cluster}/components/{name}/logs?tail=N&replica=n
// with the last N lines of the replica's log as text/plain.
func (d *Daemon) componentLogs(w http.ResponseWriter, r *http.Request) error {
	cluster, err := clusterParam(r)
	if err != nil {
		return err
	}
	name := chi.URLParam(r, "name")
	comp, err := component.Lookup(name)
	if err != nil {
		return api.Errorf(api.CodeNotFound, "no control-plane component %q (components: etcd, kube-apiserver, kube-controller-manager, kube-scheduler)", name)
	}
	if d.cfg.Runtime == RuntimeKubernetes {
		return api.Errorf(api.CodeNotFound, "the kubernetes runtime keeps no logs here: read the logs of the %s pods in namespace %s of the management cluster",
			comp.Name, kuberuntime.Namespace(cluster))
	}
	q := r.URL.Query()
	tail := DefaultLogTail
	if s := q.Get("tail"); s != "" {
		if tail, err = strconv.Atoi(s); err != nil || tail < 1 {
			return &api.Error{Code: api.CodeInvalid, Message: "invalid query", Fields: []api.FieldError{{Field: "tail", Detail: "must be a positive integer"}}}
		}
		tail = min(tail, MaxLogTail)
	}
	n := 0
	if s := q.Get("replica"); s != "" {
		if n, err = strconv.Atoi(s); err != nil || n < 0 || n >= component.MaxReplicas() {
			return &api.Error{Code: api.CodeInvalid, Message: "invalid query", Fields: []api.FieldError{{Field: "replica", Detail: "must be a replica number from 0"}}}
		}
	}
	path := filepath.Join(d.ClusterDir(cluster), filepath.FromSlash(component.LogFile(comp.Name, n)))
	b, err := tailFile(path, tail)
	if errors.Is(err, os.ErrNotExist) {
		return api.Errorf(api.CodeNotFound, "no log of %s replica %d in cluster %q", comp.Name, n, cluster)
	}
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
	return nil
}

// tailFile returns the last n lines of the file at path (from at most its last 16 MiB).
func tailFile(path string, n int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := fi.Size()
	// Read backwards in chunks until n line ends are found.
	const chunk = 64 << 10
	var buf []byte
	off := size
	for off > 0 && int64(len(buf)) < maxLogWindow {
		step := min(int64(chunk), off)
		off -= step
		part := make([]byte, step)
		if _, err := f.ReadAt(part, off); err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		buf = append(part, buf...)
		if bytes.Count(bytes.TrimSuffix(buf, []byte("\n")), []byte("\n")) >= n {
			break
		}
	}
	body := bytes.TrimSuffix(buf, []byte("\n"))
	for i, count := len(body)-1, 0; i >= 0; i-- {
		if body[i] == '\n' {
			if count++; count == n {
				return buf[i+1:], nil
			}
		}
	}
	if off > 0 { // the window ended mid-line: drop the partial first line
		if i := bytes.IndexByte(buf, '\n'); i >= 0 {
			return buf[i+1:], nil
		}
	}
	return buf, nil
}
