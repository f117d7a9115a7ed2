package localcloud

import (
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
//	POST   /machines/{cluster}/{name}/power       PowerRequest → MachineStatus
//	POST   /machines/{cluster}/{name}/userdata    UserDataRequest → MachineStatus
//	GET    /instancetypes                         → api.InstanceTypeList
func (c *Cloud) routes() http.Handler {
	// infrad polls every machine: request logs only at debug level, failures still show.
	hc := httpapi.Config{Name: Name, Logger: c.log, RequestLogLevel: slog.LevelDebug,
		Registry: c.cfg.Registry, MaxBodyBytes: 4 << 20}
	if c.auth != nil {
		hc.Middlewares = append(hc.Middlewares, c.auth.Middleware)
	}
	r := httpapi.NewRouter(hc)
	r.Get("/instancetypes", answer(func(*http.Request) (api.InstanceTypeList, error) {
		return api.InstanceTypeList{Items: api.LocalInstanceTypes()}, nil
	}))
	r.Post("/machines", withBody(func(_ *http.Request, spec MachineSpec) (MachineStatus, error) {
		return c.create(spec)
	}))
	r.Get("/machines", answer(func(r *http.Request) (MachineList, error) {
		items, err := c.list(r.URL.Query().Get("cluster"))
		return MachineList{Items: items}, err
	}))
	r.Route("/machines/{cluster}/{name}", func(r chi.Router) {
		r.Get("/", answer(func(r *http.Request) (MachineStatus, error) {
			m, err := c.lookup(chi.URLParam(r, "cluster"), chi.URLParam(r, "name"))
			if err != nil {
				return MachineStatus{}, err
			}
			return m.status(), nil
		}))
		r.Delete("/", httpapi.Handle(func(w http.ResponseWriter, r *http.Request) error {
			if err := c.remove(chi.URLParam(r, "cluster"), chi.URLParam(r, "name")); err != nil {
				return apiError(err)
			}
			w.WriteHeader(http.StatusNoContent)
			return nil
		}))
		r.Post("/fault", withBody(func(r *http.Request, req FaultRequest) (MachineStatus, error) {
			return c.fault(chi.URLParam(r, "cluster"), chi.URLParam(r, "name"), req.Type)
		}))
		r.Post("/power", withBody(func(r *http.Request, req PowerRequest) (MachineStatus, error) {
			return c.power(chi.URLParam(r, "cluster"), chi.URLParam(r, "name"), req.On)
		}))
		r.Post("/userdata", withBody(func(r *http.Request, req UserDataRequest) (MachineStatus, error) {
			return c.reconfigure(chi.URLParam(r, "cluster"), chi.URLParam(r, "name"), req.UserData)
		}))
	})
	return r
}

// answer adapts fn to a handler that answers fn's result as JSON (200), or its error as a
// problem with the code of its sentinel (apiError).
func answer[Out any](fn func(r *http.Request) (Out, error)) http.HandlerFunc {
	return httpapi.Handle(func(w http.ResponseWriter, r *http.Request) error {
		out, err := fn(r)
		if err != nil {
			return apiError(err)
		}
		httpapi.WriteJSON(w, http.StatusOK, out)
		return nil
	})
}

// withBody is answer for a request whose body (httpapi.DecodeJSON, strict) fn takes.
func withBody[In, Out any](fn func(r *http.Request, in In) (Out, error)) http.HandlerFunc {
	return answer(func(r *http.Request) (Out, error) {
		var in In
		if err := httpapi.DecodeJSON(r, &in); err != nil {
			var zero Out
			return zero, err
		}
		return fn(r, in)
	})
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
