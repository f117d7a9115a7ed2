package events

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// InboundTypePrefix prefixes the CloudEvent type of an inbound event: io.hostplane.in.<type>,
// where <type> is also the tail of its subject hostplane.in.<cluster>.<type>.
const InboundTypePrefix = TypePrefix + "in."

// The inbound event types (docs/inbound-events.md).
const (
	InboundClusterUpgrade     = "cluster.upgrade"
	InboundClusterHibernate   = "cluster.hibernate"
	InboundNodePoolScale      = "nodepool.scale"
	InboundMachineTerminating = "machine.terminating"
)

// ErrUnknownInboundType is returned for an inbound type that has no schema.
var ErrUnknownInboundType = errors.New("unknown inbound event type")

// ErrInvalidData is returned for inbound event data its schema does not accept.
var ErrInvalidData = errors.New("event data does not match its schema")

// InboundType describes one inbound event type.
type InboundType struct {
	// Type is the subject tail ("cluster.upgrade"); the CloudEvent type is io.hostplane.in.<Type>.
	Type string
	// Owner is the one daemon that applies it.
	Owner string
	// Handled says whether the owner is built and consumes the type. Until it is, events of
	// the type are rejected with "no owner handles <type> yet".
	Handled bool
	// Schema is the JSON Schema (draft 2020-12) file of its data in pkg/events/schemas.
	Schema string
}

// CloudEventType is io.hostplane.in.<type>.
func (t InboundType) CloudEventType() string { return InboundTypePrefix + t.Type }

// Inbound lists every inbound event type. Flip Handled when the owner starts consuming it.
var Inbound = []InboundType{
	{Type: InboundClusterUpgrade, Owner: "clusterd", Handled: true, Schema: "schemas/cluster.upgrade.json"},
	{Type: InboundClusterHibernate, Owner: "clusterd", Handled: true, Schema: "schemas/cluster.hibernate.json"},
	{Type: InboundNodePoolScale, Owner: "nodepoold", Handled: true, Schema: "schemas/nodepool.scale.json"},
	{Type: InboundMachineTerminating, Owner: "infrad", Handled: true, Schema: "schemas/machine.terminating.json"},
}

// LookupInbound returns the inbound type, or false.
func LookupInbound(typ string) (InboundType, bool) {
	i := slices.IndexFunc(Inbound, func(t InboundType) bool { return t.Type == typ })
	if i < 0 {
		return InboundType{}, false
	}
	return Inbound[i], true
}

//go:embed schemas/*.json
var schemaFS embed.FS

// SchemaJSON returns the JSON Schema of an inbound type's data.
func SchemaJSON(typ string) ([]byte, error) {
	t, ok := LookupInbound(typ)
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownInboundType, typ)
	}
	return schemaFS.ReadFile(t.Schema)
}

var (
	schemasOnce sync.Once
	schemas     map[string]*jsonschema.Schema
	schemasErr  error
)

func compileSchemas() {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	schemas = map[string]*jsonschema.Schema{}
	for _, t := range Inbound {
		b, err := schemaFS.ReadFile(t.Schema)
		if err != nil {
			schemasErr = err
			return
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			schemasErr = fmt.Errorf("schema %s: %w", t.Schema, err)
			return
		}
		if err := c.AddResource(t.Schema, doc); err != nil {
			schemasErr = fmt.Errorf("schema %s: %w", t.Schema, err)
			return
		}
		s, err := c.Compile(t.Schema)
		if err != nil {
			schemasErr = fmt.Errorf("schema %s: %w", t.Schema, err)
			return
		}
		schemas[t.Type] = s
	}
}

// ValidateInboundData checks data (the "data" attribute of an inbound event) against the
// schema of typ. Missing data is validated as null (and so rejected by every schema).
func ValidateInboundData(typ string, data json.RawMessage) error {
	schemasOnce.Do(compileSchemas)
	if schemasErr != nil {
		return schemasErr
	}
	s, ok := schemas[typ]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownInboundType, typ)
	}
	if len(data) == 0 {
		data = json.RawMessage("null")
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidData, err)
	}
	if err := s.Validate(inst); err != nil {
		if ve, ok := errors.AsType[*jsonschema.ValidationError](err); ok {
			return fmt.Errorf("%w: %s", ErrInvalidData, flatten(ve))
		}
		return fmt.Errorf("%w: %v", ErrInvalidData, err)
	}
	return nil
}

// flatten renders a validation error as "<path>: <message>" of its leaves, joined by "; ".
func flatten(ve *jsonschema.ValidationError) string {
	var out []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			loc := "/" + strings.Join(e.InstanceLocation, "/")
			out = append(out, fmt.Sprintf("%s: %s", loc, e.ErrorKind.LocalizedString(message.NewPrinter(language.English))))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return strings.Join(out, "; ")
}
