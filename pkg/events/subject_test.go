package events

import (
	"errors"
	"testing"
)

func TestSubject_BuildAndParseRoundTrip(t *testing.T) {
	s, err := Subject("demo", ResourceNodePool, "updated")
	if err != nil {
		t.Fatal(err)
	}
	if s != "hostplane.evt.demo.nodepool.updated" {
		t.Fatalf("subject = %q", s)
	}
	got, err := ParseSubject(s)
	if err != nil {
		t.Fatal(err)
	}
	if got != (EventSubject{Cluster: "demo", Resource: ResourceNodePool, Verb: "updated"}) {
		t.Fatalf("parsed = %+v", got)
	}
}

func TestParseSubject_RejectsWhatIsNotTheGrammar(t *testing.T) {
	for _, s := range []string{
		"", "hostplane.evt", "hostplane.evt.demo.cluster", "hostplane.evt.demo.cluster.created.extra",
		"hostplane.in.demo.cluster.created", "other.evt.demo.cluster.created",
		"hostplane.evt.*.cluster.created", "hostplane.evt.>.cluster.created", "hostplane.evt.Demo.cluster.created",
		"hostplane.evt.demo.widget.created", "hostplane.evt.demo.cluster.", "hostplane.evt.-demo.cluster.created",
	} {
		if _, err := ParseSubject(s); !errors.Is(err, ErrBadSubject) {
			t.Errorf("ParseSubject(%q) err = %v, want ErrBadSubject", s, err)
		}
	}
}

func TestSubject_RefusesWildcardsInTokens(t *testing.T) {
	for _, c := range []struct{ cluster, verb string }{{"*", "created"}, {"demo", ">"}, {"a.b", "created"}, {"demo", "Created"}} {
		if _, err := Subject(c.cluster, ResourceCluster, c.verb); err == nil {
			t.Errorf("Subject(%q, cluster, %q) accepted", c.cluster, c.verb)
		}
	}
}

func TestInboxSubject(t *testing.T) {
	s, err := InboxSubject("demo", "nodepool.scale")
	if err != nil || s != "hostplane.in.demo.nodepool.scale" {
		t.Fatalf("InboxSubject = %q, %v", s, err)
	}
	c, typ, err := ParseInboxSubject(s)
	if err != nil || c != "demo" || typ != "nodepool.scale" {
		t.Fatalf("ParseInboxSubject = %q %q %v", c, typ, err)
	}
	for _, bad := range []string{"hostplane.in.demo", "hostplane.evt.demo.x", "hostplane.in.demo.Bad"} {
		if _, _, err := ParseInboxSubject(bad); err == nil {
			t.Errorf("ParseInboxSubject(%q) accepted", bad)
		}
	}
}
