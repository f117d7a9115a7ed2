package events

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// SpecVersion is the CloudEvents version hostplane speaks.
const SpecVersion = "1.0"

// TypePrefix prefixes every event type: io.hostplane.<resource>.<verb>.
const TypePrefix = "io.hostplane."

// Event is a CloudEvent in structured JSON mode.
type Event struct {
	SpecVersion     string          `json:"specversion"`
	ID              string          `json:"id"`
	Source          string          `json:"source"`
	Type            string          `json:"type"`
	Subject         string          `json:"subject,omitempty"`
	Time            time.Time       `json:"time"`
	DataContentType string          `json:"datacontenttype,omitempty"`
	Data            json.RawMessage `json:"data,omitempty"`
}

// New builds an event about key (the "subject" attribute, for example "demo" or
// "demo/workers") with a fresh id. source names the publishing daemon ("/hostplane/clusterd").
// data is marshalled as JSON; nil means no data.
func New(source string, resource Resource, verb, key string, data any) (Event, error) {
	e := Event{
		SpecVersion: SpecVersion,
		ID:          NewID(),
		Source:      source,
		Type:        TypePrefix + string(resource) + "." + verb,
		Subject:     key,
		Time:        time.Now().UTC(),
	}
	if data != nil {
		b, err := json.Marshal(data)
		if err != nil {
			return Event{}, fmt.Errorf("marshal event data: %w", err)
		}
		e.Data = b
		e.DataContentType = "application/json"
	}
	return e, nil
}

// NewOn is New with the subject the event is published on:
// hostplane.evt.<cluster>.<resource>.<verb>.
func NewOn(source, cluster string, resource Resource, verb, key string, data any) (string, Event, error) {
	subject, err := Subject(cluster, resource, verb)
	if err != nil {
		return "", Event{}, err
	}
	e, err := New(source, resource, verb, key, data)
	return subject, e, err
}

// NewID returns a random 128-bit id in hex.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Validate checks the required CloudEvents attributes.
func (e Event) Validate() error {
	switch {
	case e.SpecVersion != SpecVersion:
		return fmt.Errorf("%w: specversion %q, want %q", ErrBadEvent, e.SpecVersion, SpecVersion)
	case e.ID == "":
		return fmt.Errorf("%w: id is empty", ErrBadEvent)
	case e.Source == "":
		return fmt.Errorf("%w: source is empty", ErrBadEvent)
	case e.Type == "":
		return fmt.Errorf("%w: type is empty", ErrBadEvent)
	}
	return nil
}

// Decode parses a structured-mode CloudEvent strictly (unknown attributes, trailing data and
// missing required attributes are errors).
func Decode(b []byte) (Event, error) {
	var e Event
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return Event{}, fmt.Errorf("%w: %v", ErrBadEvent, err)
	}
	// Whatever follows the event but white space is refused (Decoder.More would let a
	// closing '}' or ']' through).
	if rest := bytes.TrimSpace(b[dec.InputOffset():]); len(rest) > 0 {
		return Event{}, fmt.Errorf("%w: trailing data after the event", ErrBadEvent)
	}
	if err := e.Validate(); err != nil {
		return Event{}, err
	}
	return e, nil
}

// DecodeData unmarshals the event's data into v.
func (e Event) DecodeData(v any) error {
	if len(e.Data) == 0 {
		return fmt.Errorf("%w: event %s has no data", ErrBadEvent, e.ID)
	}
	if err := json.Unmarshal(e.Data, v); err != nil {
		return fmt.Errorf("%w: data of event %s: %v", ErrBadEvent, e.ID, err)
	}
	return nil
}
