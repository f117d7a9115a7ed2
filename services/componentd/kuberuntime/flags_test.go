package kuberuntime

import (
	"context"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/testenv"
)

// TestRender_EveryArgumentIsAFlagOfTheComponentsBinary checks the rendered arguments
// against the --help of the release's real binaries (the process runtime's; the images run
// the same programs), so a misspelt or removed flag fails here rather than in a crashing pod.
func TestRender_EveryArgumentIsAFlagOfTheComponentsBinary(t *testing.T) {
	for _, version := range []string{"1.33.13", "1.34.4"} {
		rel := mustRelease(t, version)
		testenv.RequireBinaries(t, rel, Components()...)
		// Both policies: the release catalogue's tuning differs between them.
		args := map[string][]string{}
		for _, policy := range []string{api.HighlyAvailable, api.SingleReplica} {
			in, _ := testInputs(t, "flags", policy, version)
			o := mustRender(t, in)
			for _, s := range o.StatefulSets {
				args[*s.Name] = append(args[*s.Name], s.Spec.Template.Spec.Containers[0].Args...)
			}
			for _, d := range o.Deployments {
				args[*d.Name] = append(args[*d.Name], d.Spec.Template.Spec.Containers[0].Args...)
			}
		}
		flagRE := regexp.MustCompile(`--[a-z0-9][a-z0-9-]*`)
		for _, c := range Components() {
			bin, err := rel.Binary(c)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			out, _ := exec.CommandContext(ctx, bin, "--help").CombinedOutput() // etcd --help exits 0, others too; output is what counts
			cancel()
			known := map[string]bool{}
			for _, f := range flagRE.FindAllString(string(out), -1) {
				known[f] = true
			}
			if len(known) < 20 {
				t.Fatalf("%s %s --help listed %d flags: %s", c, version, len(known), out)
			}
			for _, a := range args[c] {
				name, _, _ := strings.Cut(a, "=")
				if !known[name] {
					t.Errorf("%s %s: %s is not a flag of %s", c, version, name, bin)
				}
			}
		}
	}
}
