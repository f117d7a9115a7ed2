package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

// FuzzParseSubject: ParseSubject never panics, refuses with ErrBadSubject, and a subject it
// accepts is what String and Subject build from its parts.
func FuzzParseSubject(f *testing.F) {
	for _, s := range []string{
		"hostplane.evt.demo.nodepool.updated", "hostplane.evt.demo.cluster.created", "hostplane.evt.prod.inbox.rejected",
		"", "hostplane.evt", "hostplane.evt.demo.cluster", "hostplane.evt.demo.cluster.created.extra",
		"hostplane.in.demo.cluster.created", "hostplane.evt.*.cluster.created", "hostplane.evt.>.cluster.created",
		"hostplane.evt.Demo.cluster.created", "hostplane.evt.demo.widget.created", "hostplane.evt.demo.cluster.",
		"hostplane.evt.-demo.cluster.created", "hostplane.evt.demo.cluster.cre ated",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, subject string) {
		s, err := ParseSubject(subject)
		if err != nil {
			if !errors.Is(err, ErrBadSubject) {
				t.Fatalf("ParseSubject(%q) = %v, want ErrBadSubject", subject, err)
			}
			return
		}
		if s.String() != subject {
			t.Fatalf("ParseSubject(%q) = %+v, which formats as %q", subject, s, s.String())
		}
		built, err := Subject(s.Cluster, s.Resource, s.Verb)
		if err != nil || built != subject {
			t.Fatalf("Subject(%+v) = %q, %v; want %q", s, built, err, subject)
		}
	})
}

// FuzzParseInboxSubject: ParseInboxSubject never panics, refuses with ErrBadSubject, and a
// subject it accepts is what InboxSubject builds from its cluster and type.
func FuzzParseInboxSubject(f *testing.F) {
	for _, s := range []string{
		"hostplane.in.demo.nodepool.scale", "hostplane.in.demo.cluster.upgrade", "hostplane.in.prod.machine.terminating",
		"hostplane.in.demo.x", "hostplane.in.demo", "hostplane.in.demo.", "hostplane.in..x", "hostplane.evt.demo.x",
		"hostplane.in.demo.Bad", "hostplane.in.*.cluster.upgrade", "hostplane.in.demo.>", "hostplane.in.demo.a..b", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, subject string) {
		cluster, typ, err := ParseInboxSubject(subject)
		if err != nil {
			if !errors.Is(err, ErrBadSubject) {
				t.Fatalf("ParseInboxSubject(%q) = %v, want ErrBadSubject", subject, err)
			}
			return
		}
		built, err := InboxSubject(cluster, typ)
		if err != nil || built != subject {
			t.Fatalf("InboxSubject(%q, %q) = %q, %v; want %q", cluster, typ, built, err, subject)
		}
	})
}

// inboundEvents are CloudEvents as other systems publish them on hostplane.in (from the
// inbox tests and docs/inbound-events.md), and broken ones.
var inboundEvents = []string{
	`{"specversion":"1.0","id":"deploy-4711","source":"/ci","type":"io.hostplane.in.cluster.upgrade","time":"2026-01-02T15:04:05Z",` +
		`"datacontenttype":"application/json","data":{"version":"1.34.4"}}`,
	`{"specversion":"1.0","id":"s-1","source":"/test","type":"io.hostplane.in.nodepool.scale","time":"2026-01-02T15:04:05+01:00",` +
		`"datacontenttype":"application/json","data":{"nodePool":"workers","replicas":3}}`,
	`{"specversion":"1.0","id":"spot-9","source":"/cloud","type":"io.hostplane.in.machine.terminating","time":"2026-01-02T15:04:05Z",` +
		`"subject":"workers-7f9c2","data":{"machine":"workers-7f9c2","notBefore":"2026-01-02T15:06:05Z"}}`,
	`{"specversion":"1.0","id":"1","source":"s","type":"io.hostplane.in.nodepool.scale","time":"2026-01-01T00:00:00Z","data":{"nodePool":"w","replicas":-1}}`,
	`{"specversion":"1.0","id":"1","source":"s","type":"t","time":"2026-01-01T00:00:00Z","data":null}`,
	`{"specversion":"1.0","id":"1","source":"s","type":"t","time":"2026-01-01T00:00:00Z"} {}`,
	`{"specversion":"1.0","id":"1","source":"s","type":"t","time":"2026-01-01T00:00:00Z","bogus":1}`,
	`{"specversion":"0.3","id":"1","source":"s","type":"t","time":"2026-01-01T00:00:00Z"}`,
	`{"specversion":"1.0","id":1,"source":"s","type":"t","time":"yesterday"}`,
	`{`, `[]`, `null`, ``,
}

// FuzzDecodeInbound: an inbound message's payload through Decode and, for every inbound
// type, ValidateInboundData never panics; Decode accepts exactly one JSON value, and an
// event it accepts encodes and decodes back to the same event.
func FuzzDecodeInbound(f *testing.F) {
	for _, s := range inboundEvents {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrBadEvent) {
				t.Fatalf("Decode(%q) = %v, want ErrBadEvent", b, err)
			}
			return
		}
		if !json.Valid(b) {
			t.Fatalf("Decode accepted %q, which is not one JSON value", b)
		}
		for _, it := range Inbound {
			if err := ValidateInboundData(it.Type, ev.Data); err != nil && !errors.Is(err, ErrInvalidData) {
				t.Fatalf("ValidateInboundData(%s, %q) = %v, want ErrInvalidData", it.Type, ev.Data, err)
			}
		}
		enc, err := json.Marshal(ev)
		if err != nil {
			t.Fatalf("Decode(%q) accepted an event that does not encode: %v", b, err)
		}
		again, err := Decode(enc)
		if err != nil {
			t.Fatalf("Decode(%q): the event encodes as %s, which does not decode: %v", b, enc, err)
		}
		if enc2, _ := json.Marshal(again); !bytes.Equal(enc, enc2) {
			t.Fatalf("Decode(%q): encodes as %s, then as %s", b, enc, enc2)
		}
	})
}
