package events

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// brokenVariants are, per inbound type, data its schema must refuse.
var brokenVariants = map[string][]string{
	InboundClusterUpgrade: {
		`{}`, `{"version": 134}`, `{"version": "v1.34.4"}`, `{"version": "1.34"}`,
		`{"version": "1.34.4", "extra": true}`, `null`, `"1.34.4"`,
	},
	InboundClusterHibernate: {
		`{}`, `{"enabled": "yes"}`, `{"enabled": 1}`, `{"enabled": true, "reason": "x"}`, `null`, `true`,
	},
	InboundNodePoolScale: {
		`{"nodePool": "workers"}`, `{"nodePool": "workers", "replicas": -1}`,
		`{"nodePool": "workers", "replicas": 1.5}`, `{"nodePool": "Workers!", "replicas": 1}`,
		`{"replicas": 2}`, `{"nodePool": "workers", "replicas": "3"}`,
	},
	InboundMachineTerminating: {
		`{}`, `{"machine": "m1", "notBefore": "tomorrow"}`, `{"machine": 7}`,
		`{"machine": "m1", "reason": "spot"}`,
	},
}

func TestInboundSchemas_AcceptEveryExampleAndRejectBrokenVariants(t *testing.T) {
	for _, it := range Inbound {
		b, err := SchemaJSON(it.Type)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Schema   string            `json:"$schema"`
			Examples []json.RawMessage `json:"examples"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatalf("%s: %v", it.Schema, err)
		}
		if doc.Schema != "https://json-schema.org/draft/2020-12/schema" {
			t.Errorf("%s: $schema %q, want draft 2020-12", it.Schema, doc.Schema)
		}
		if len(doc.Examples) == 0 {
			t.Errorf("%s: no examples", it.Schema)
		}
		for i, ex := range doc.Examples {
			if err := ValidateInboundData(it.Type, ex); err != nil {
				t.Errorf("%s example %d (%s): %v", it.Type, i+1, ex, err)
			}
			// A broken variant of each example: an extra, unknown property.
			var m map[string]any
			if err := json.Unmarshal(ex, &m); err != nil {
				t.Fatal(err)
			}
			m["unexpected"] = true
			broken, _ := json.Marshal(m)
			if err := ValidateInboundData(it.Type, broken); !errors.Is(err, ErrInvalidData) {
				t.Errorf("%s: %s accepted (err %v)", it.Type, broken, err)
			}
		}
		if len(brokenVariants[it.Type]) == 0 {
			t.Errorf("%s: the test has no broken variants", it.Type)
		}
		for _, bad := range brokenVariants[it.Type] {
			if err := ValidateInboundData(it.Type, json.RawMessage(bad)); !errors.Is(err, ErrInvalidData) {
				t.Errorf("%s: %s accepted (err %v)", it.Type, bad, err)
			}
		}
		if err := ValidateInboundData(it.Type, nil); !errors.Is(err, ErrInvalidData) {
			t.Errorf("%s: missing data accepted (err %v)", it.Type, err)
		}
	}
}

func TestValidateInboundData_NamesTheFieldThatIsWrong(t *testing.T) {
	err := ValidateInboundData(InboundClusterUpgrade, json.RawMessage(`{"version": 1}`))
	if err == nil || !strings.Contains(err.Error(), "/version") {
		t.Fatalf("err = %v, want it to name /version", err)
	}
	if err := ValidateInboundData("cluster.explode", json.RawMessage(`{}`)); !errors.Is(err, ErrUnknownInboundType) {
		t.Fatalf("err = %v, want ErrUnknownInboundType", err)
	}
}
