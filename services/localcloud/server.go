package localcloud

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/httpapi"
)

// Name is the local cloud's name in logs and metrics.
const Name = "localcloud"

// routes is the cloud's API (see Client):
//
//	POST   /machines                              MachineSpec → MachineStatus
//	GET    /machines?cluster=                     → MachineList
//	GET    /machines/{cluster}/{name}             → MachineStatus
//	DELETE /machines/{cluster}/{name}             → 204
//	POST   /machines/{cluster}/{name}/fault       FaultRequest → MachineStatus
//	POST   /machines/{cluster}/{name}/userdata    UserDataRequest → MachineStatus
//	GET    /instancetypes                         → api.InstanceTypeList
func (c *Cloud) routes() http.Handler {
	// infrad polls every machine: request logs only at debug level, failures still show.
	r := httpapi.NewRouter(httpapi.Config{Name: Name, Logger: slog.New(quietRequests{c.log.Handler()}),
		Registry: c.cfg.Registry, MaxBodyBytes: 4 << 20})
	r.Get("/instancetypes", httpapi.Handle(func(w http.ResponseWriter, _ *http.Request) error {
		httpapi.WriteJSON(w, http.StatusOK, api.InstanceTypeList{Items: api.LocalInstanceTypes()})
		return nil
	}))
	r.Post("/machines", httpapi.Handle(func(w http.ResponseWriter, r *http.Request) error {
		var spec MachineSpec
		if err := httpapi.DecodeJSON(r, &spec); err != nil {
			return err
		}
		st, err := c.create(spec)
		if err != nil {
			return apiError(err)
		}
		httpapi.WriteJSON(w, http.StatusOK, st)
		return nil
	}))
	r.Get("/machines", httpapi.Handle(func(w http.ResponseWriter, r *http.Request) error {
		items, err := c.list(r.URL.Query().Get("cluster"))
		if err != nil {
			return apiError(err)
		}
		httpapi.WriteJSON(w, http.StatusOK, MachineList{Items: items})
		return nil
	}))
	r.Route("/machines/{cluster}/{name}", func(r chi.Router) {
		r.Get("/", httpapi.Handle(func(w http.ResponseWriter, r *http.Request) error {
			m, err := c.lookup(chi.URLParam(r, "cluster"), chi.URLParam(r, "name"))
			if err != nil {
				return apiError(err)
			}
			httpapi.WriteJSON(w, http.StatusOK, m.status())
			return nil
		}))
		r.Delete("/", httpapi.Handle(func(w http.ResponseWriter, r *http.Request) error {
			if err := c.remove(chi.URLParam(r, "cluster"), chi.URLParam(r, "name")); err != nil {
				return apiError(err)
			}
			w.WriteHeader(http.StatusNoContent)
			return nil
		}))
		r.Post("/fault", httpapi.Handle(func(w http.ResponseWriter, r *http.Request) error {
			var req FaultRequest
			if err := httpapi.DecodeJSON(r, &req); err != nil {
				return err
			}
			st, err := c.fault(chi.URLParam(r, "cluster"), chi.URLParam(r, "name"), req.Type)
			if err != nil {
				return apiError(err)
			}
			httpapi.WriteJSON(w, http.StatusOK, st)
			return nil
		}))
		r.Post("/power", httpapi.Handle(func(w http.ResponseWriter, r *http.Request) error {
			var req PowerRequest
			if err := httpapi.DecodeJSON(r, &req); err != nil {
				return err
			}
			st, err := c.power(chi.URLParam(r, "cluster"), chi.URLParam(r, "name"), req.On)
			if err != nil {
				return apiError(err)
			}
			httpapi.WriteJSON(w, http.StatusOK, st)
			return nil
		}))
		r.Post("/userdata", httpapi.Handle(func(w http.ResponseWriter, r *http.Request) error {
			var req UserDataRequest
			if err := httpapi.DecodeJSON(r, &req); err != nil {
				return err
			}
			st, err := c.reconfigure(chi.URLParam(r, "cluster"), chi.URLParam(r, "name"), req.UserData)
			if err != nil {
				return apiError(err)
			}
			httpapi.WriteJSON(w, http.StatusOK, st)
			return nil
		}))
	})
	return r
}

// apiError gives err the application code its sentinel stands for.
func apiError(err error) error {
	var ae *api.Error
	switch {
	case errors.As(err, &ae):
		return err
	case errors.Is(err, ErrNotFound):
		return &api.Error{Code: api.CodeNotFound, Message: "machine not found", Err: err}
	case errors.Is(err, ErrUnknownFault):
		return &api.Error{Code: api.CodeInvalid, Message: "unknown fault", Err: err, Fields: []api.FieldError{{
			Field: "type", Detail: "must be one of " + api.FaultStopHeartbeats + ", " + api.FaultCrash + ", " + api.FaultFailNextBoot,
		}}}
	case errors.Is(err, ErrNotRunning):
		return &api.Error{Code: api.CodeUnavailable, Message: "the local cloud is stopping", Err: err}
	}
	return err
}

// quietRequests turns the router's per-request Info logs into Debug ones.
type quietRequests struct{ slog.Handler }

func (q quietRequests) Enabled(ctx context.Context, l slog.Level) bool {
	if l == slog.LevelInfo {
		l = slog.LevelDebug
	}
	return q.Handler.Enabled(ctx, l)
}

func (q quietRequests) Handle(ctx context.Context, r slog.Record) error {
	if r.Level == slog.LevelInfo {
		r.Level = slog.LevelDebug
	}
	return q.Handler.Handle(ctx, r)
}

func (q quietRequests) WithAttrs(as []slog.Attr) slog.Handler {
	return quietRequests{q.Handler.WithAttrs(as)}
}

func (q quietRequests) WithGroup(name string) slog.Handler {
	return quietRequests{q.Handler.WithGroup(name)}
}
