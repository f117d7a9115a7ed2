package events

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestNewEvent_EncodesAsStructuredCloudEvent(t *testing.T) {
	ev, err := New("/hostplane/clusterd", ResourceCluster, "created", "demo", map[string]string{"release": "1.34.4"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(ev)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"specversion", "id", "source", "type", "subject", "time", "data"} {
		if _, ok := m[k]; !ok {
			t.Errorf("attribute %q missing from %s", k, b)
		}
	}
	if m["type"] != "io.hostplane.cluster.created" {
		t.Errorf("type = %v", m["type"])
	}
	back, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	var data map[string]string
	if err := back.DecodeData(&data); err != nil || data["release"] != "1.34.4" {
		t.Fatalf("data = %v, %v", data, err)
	}
}

func TestDecode_RejectsMalformedEvents(t *testing.T) {
	for name, in := range map[string]string{
		"not json":        `{`,
		"trailing":        `{"specversion":"1.0","id":"1","source":"s","type":"t","time":"2026-01-01T00:00:00Z"} {}`,
		"trailing brace":  `{"specversion":"1.0","id":"1","source":"s","type":"t","time":"2026-01-01T00:00:00Z"}}`,
		"unknown attr":    `{"specversion":"1.0","id":"1","source":"s","type":"t","time":"2026-01-01T00:00:00Z","bogus":1}`,
		"no id":           `{"specversion":"1.0","source":"s","type":"t","time":"2026-01-01T00:00:00Z"}`,
		"wrong version":   `{"specversion":"0.3","id":"1","source":"s","type":"t","time":"2026-01-01T00:00:00Z"}`,
		"no type":         `{"specversion":"1.0","id":"1","source":"s","time":"2026-01-01T00:00:00Z"}`,
		"id not a string": `{"specversion":"1.0","id":1,"source":"s","type":"t","time":"2026-01-01T00:00:00Z"}`,
	} {
		if _, err := Decode([]byte(in)); !errors.Is(err, ErrBadEvent) {
			t.Errorf("%s: err = %v, want ErrBadEvent", name, err)
		}
	}
}
