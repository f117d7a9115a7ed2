package apicheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/hostplane/hostplane/pkg/api"
)

// ignitionJSON is the media type of an Ignition config (GET /ignition/{cluster}): JSON.
const ignitionJSON = "application/vnd.coreos.ignition+json"

var registerOnce sync.Once

// Load parses pkg/api/openapi.json and validates it as an OpenAPI 3 document: structure,
// references, schemas, and every example and default against its schema.
func Load(ctx context.Context) (*openapi3.T, error) {
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI())
	if err != nil {
		return nil, fmt.Errorf("openapi.json does not load: %w", err)
	}
	if err := doc.Validate(ctx, openapi3.EnableSchemaFormatValidation()); err != nil {
		return nil, fmt.Errorf("openapi.json is not a valid OpenAPI 3 document: %w", err)
	}
	return doc, nil
}

// Checker validates requests and answers against the document.
type Checker struct {
	doc    *openapi3.T
	router routers.Router
	opts   *openapi3filter.Options
}

// New loads and validates the document and returns a Checker of it.
func New(ctx context.Context) (*Checker, error) {
	doc, err := Load(ctx)
	if err != nil {
		return nil, err
	}
	registerOnce.Do(func() {
		openapi3filter.RegisterBodyDecoder(ignitionJSON, openapi3filter.JSONBodyDecoder)
	})
	// The document names `hostplane dev`'s default address; tests listen anywhere, so
	// routes match on the path alone.
	anyServer := *doc
	anyServer.Servers = nil
	router, err := gorillamux.NewRouter(&anyServer)
	if err != nil {
		return nil, fmt.Errorf("routing openapi.json: %w", err)
	}
	opts := &openapi3filter.Options{
		// Every status an answer has must be documented, with its content type.
		IncludeResponseStatus: true,
		MultiError:            true,
		AuthenticationFunc:    bearerSent,
		// Validate what was sent, not what the document's defaults would make of it.
		SkipSettingDefaults: true,
	}
	opts.WithCustomSchemaErrorFunc(schemaError)
	return &Checker{doc: doc, router: router, opts: opts}, nil
}

// schemaError says where a value fails its schema and why, with the value, leaving out the
// schema itself (the document has it).
func schemaError(e *openapi3.SchemaError) string {
	if e.Origin != nil {
		return ""
	}
	v, _ := json.Marshal(e.Value)
	if len(v) > 200 {
		v = append(v[:200], "…"...)
	}
	return fmt.Sprintf("at %q: %s (value %s)", "/"+strings.Join(e.JSONPointer(), "/"), e.Reason, v)
}

// Document returns the validated document.
func (c *Checker) Document() *openapi3.T { return c.doc }

// bearerSent checks only that an operation needing the bearer scheme is sent a bearer
// token: whether the token is good and its role enough is the server's to judge.
func bearerSent(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	s := in.SecurityScheme
	if s == nil || s.Type != "http" || !strings.EqualFold(s.Scheme, "bearer") {
		return nil
	}
	scheme, token, _ := strings.Cut(in.RequestValidationInput.Request.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "bearer") || token == "" {
		return errors.New("no Authorization: Bearer token")
	}
	return nil
}

// errNoRoute marks a request to a path or method the document does not describe.
var errNoRoute = errors.New("not in the document")

// request finds the request's operation and validates the request (its body is body) against
// it. A nil input means the route is not documented (err says why).
func (c *Checker) request(req *http.Request, body []byte) (*openapi3filter.RequestValidationInput, error) {
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNoRoute, err)
	}
	r := req.Clone(req.Context())
	r.Body = http.NoBody
	if body != nil {
		r.Body = readCloser(body)
	}
	in := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route, Options: c.opts}
	return in, openapi3filter.ValidateRequest(req.Context(), in)
}

// response validates an answer to the request in; body is nil for a stream, whose status,
// headers and content type are checked but not its body.
func (c *Checker) response(ctx context.Context, in *openapi3filter.RequestValidationInput, resp *http.Response, body []byte) error {
	opts := *c.opts
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header, Options: &opts,
	}
	if body == nil {
		opts.ExcludeResponseBody = true
		if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
			return err
		}
		return c.contentType(in.Route.Operation, resp)
	}
	out.SetBodyBytes(body)
	return openapi3filter.ValidateResponse(ctx, out)
}

// contentType checks that the answer's content type is one the document gives its status.
func (c *Checker) contentType(op *openapi3.Operation, resp *http.Response) error {
	ref := op.Responses.Status(resp.StatusCode)
	if ref == nil {
		ref = op.Responses.Default()
	}
	if ref == nil || ref.Value == nil || len(ref.Value.Content) == 0 {
		return nil
	}
	ct := resp.Header.Get("Content-Type")
	if ref.Value.Content.Get(ct) == nil {
		return fmt.Errorf("response Content-Type %q is not one the document gives status %d (%s)",
			ct, resp.StatusCode, strings.Join(slices.Sorted(maps.Keys(ref.Value.Content)), ", "))
	}
	return nil
}
