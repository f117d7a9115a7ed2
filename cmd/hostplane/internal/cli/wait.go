package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/client"
)

// pollInterval is how often --wait reads the cluster.
const pollInterval = time.Second

// observation is what one poll saw.
type observation struct {
	cluster    *api.Cluster // nil once the cluster is gone (404)
	components []api.ControlPlaneComponent
	nodePool   *api.NodePool // with waitSpec.nodePool; nil once the pool is gone (404)
}

// waitSpec says what --wait waits for.
type waitSpec struct {
	// goal names the target in the progress line ("Available", "deletion", "release 1.34.4").
	goal string
	// cluster is the cluster's name.
	cluster string
	// done reports success, or a terminal failure as an error.
	done func(obs observation) (bool, error)
	// detail summarises progress from an observation.
	detail func(obs observation) string
	// components: also list the components on every poll (for the progress line).
	components bool
	// nodePool, when set, is a pool of the cluster read on every poll.
	nodePool string
}

// progress writes the live line on a terminal, or a plain line per change elsewhere.
type progress struct {
	w     io.Writer
	tty   bool
	last  string
	shown bool
}

func newProgress(w io.Writer) *progress {
	return &progress{w: w, tty: isTerminal(w)}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func (p *progress) update(line string, elapsed time.Duration) {
	if p.tty {
		fmt.Fprintf(p.w, "\r\x1b[K%s (%s)", line, humanDuration(elapsed))
		p.shown = true
		return
	}
	if line != p.last {
		fmt.Fprintf(p.w, "%s (%s)\n", line, humanDuration(elapsed))
		p.last = line
	}
}

// end finishes the live line.
func (p *progress) end() {
	if p.tty && p.shown {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.shown = false
	}
}

// wait polls the cluster until spec.done says so, the timeout passes (a *TimeoutError), a
// terminal failure, or ctx ends. Transient errors (the server unreachable, 5xx) are shown
// and retried.
func (o *Options) wait(ctx context.Context, c *client.Client, spec waitSpec, timeout time.Duration) error {
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	p := newProgress(o.ErrOut)
	defer p.end()
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	var lastDetail string
	for {
		obs, err := observe(wctx, c, spec)
		var line string
		switch {
		case err == nil:
			ok, ferr := spec.done(obs)
			if ferr != nil {
				return ferr
			}
			if ok {
				return nil
			}
			lastDetail = spec.detail(obs)
			line = fmt.Sprintf("waiting for %s: %s", spec.goal, lastDetail)
		case ctx.Err() != nil:
			return fmt.Errorf("interrupted while waiting for %s; the operation goes on in the server: %w", spec.goal, ctx.Err())
		case wctx.Err() != nil:
			// the deadline hit during the poll itself; handled below
		case retryable(err):
			line = fmt.Sprintf("waiting for %s: %s (retrying: %v)", spec.goal, lastDetail, firstLine(err))
		default:
			return err
		}
		if line != "" {
			p.update(line, time.Since(start))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("interrupted while waiting for %s; the operation goes on in the server: %w", spec.goal, ctx.Err())
		case <-wctx.Done():
			p.end()
			msg := fmt.Sprintf("timed out after %s waiting for cluster %s: %s", timeout, spec.cluster, spec.goal)
			if lastDetail != "" {
				msg += ": " + lastDetail
			}
			return &TimeoutError{Msg: msg}
		case <-t.C:
		}
	}
}

func observe(ctx context.Context, c *client.Client, spec waitSpec) (observation, error) {
	var obs observation
	cl, err := c.GetCluster(ctx, spec.cluster)
	if client.IsNotFound(err) {
		return obs, nil
	}
	if err != nil {
		return obs, err
	}
	obs.cluster = cl
	if spec.nodePool != "" {
		np, err := c.GetNodePool(ctx, spec.cluster, spec.nodePool)
		switch {
		case err == nil:
			obs.nodePool = np
		case client.IsNotFound(err):
		default:
			return obs, err
		}
	}
	if spec.components {
		l, err := c.Components(ctx, spec.cluster)
		switch {
		case err == nil:
			obs.components = l.Items
		case client.IsNotFound(err):
		default:
			return obs, err
		}
	}
	return obs, nil
}

// retryable reports whether err may pass on its own: the server unreachable or a 5xx.
func retryable(err error) bool {
	if errors.Is(err, client.ErrUnreachable) {
		return true
	}
	var e *client.Error
	return errors.As(err, &e) && e.Status >= 500
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// componentSummary is "etcd 1/1, kube-apiserver 0/1, ..."; with version set, components
// not yet at it show the version they run.
func componentSummary(comps []api.ControlPlaneComponent, version string) string {
	var parts []string
	for _, c := range comps {
		s := fmt.Sprintf("%s %d/%d", c.Name, c.Status.ReadyReplicas, c.Spec.Replicas)
		if version != "" && c.Name != api.ComponentEtcd && c.Status.Version != version {
			s += " at " + cmp.Or(c.Status.Version, "?")
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// conditionMessage is "Reason: message" of the condition, or "".
func conditionMessage(cl *api.Cluster, t string) string {
	c, ok := cl.Status.Conditions.Get(t)
	if !ok {
		return ""
	}
	if c.Message == "" {
		return c.Reason
	}
	return c.Message
}

// invalidConfig is the terminal failure every wait checks: the server says the spec cannot
// be built.
func invalidConfig(cl *api.Cluster) error {
	if c, ok := cl.Status.Conditions.Get(api.ConditionValidConfiguration); ok && c.Status == api.ConditionFalse &&
		c.ObservedGeneration >= cl.Generation {
		return fmt.Errorf("cluster %s has an invalid configuration: %s", cl.Name, c.Message)
	}
	return nil
}

// availableSpec waits for Available=True at the cluster's current generation.
func availableSpec(name string, gen int64) waitSpec {
	return waitSpec{
		goal: "Available", cluster: name, components: true,
		done: func(obs observation) (bool, error) {
			cl := obs.cluster
			if cl == nil {
				return false, fmt.Errorf("cluster %s was deleted while waiting for it to become Available", name)
			}
			if err := invalidConfig(cl); err != nil {
				return false, err
			}
			if cl.DeletionTimestamp != nil {
				return false, fmt.Errorf("cluster %s is being deleted", name)
			}
			return cl.Status.ObservedGeneration >= gen && cl.Status.Conditions.IsTrue(api.ConditionAvailable), nil
		},
		detail: func(obs observation) string {
			if s := componentSummary(obs.components, ""); s != "" {
				if d, ok := obs.cluster.Status.Conditions.Get(api.ConditionDegraded); ok && d.Status == api.ConditionTrue {
					s += "; degraded: " + d.Message
				}
				return s
			}
			return cmp.Or(conditionMessage(obs.cluster, api.ConditionAvailable), "accepted, not yet reconciled")
		},
	}
}

// nodePoolNoManagementCluster is the Ready reason of a pool whose server runs no management
// cluster: no machine will ever come, so --wait stops at once.
const nodePoolNoManagementCluster = "NoManagementCluster"

// nodePoolReadySpec waits until the pool observed generation gen and has every machine it
// wants Ready and updated (a pool of 0 machines is done with none left).
func nodePoolReadySpec(cluster, pool string, gen int64, goal string) waitSpec {
	return waitSpec{
		goal: goal, cluster: cluster, nodePool: pool,
		done: func(obs observation) (bool, error) {
			if obs.cluster == nil {
				return false, fmt.Errorf("cluster %s is gone", cluster)
			}
			np := obs.nodePool
			if np == nil {
				return false, fmt.Errorf("node pool %s of cluster %s is gone", pool, cluster)
			}
			if c, ok := np.Status.Conditions.Get(api.NodePoolConditionValidMachineConfig); ok && c.Status == api.ConditionFalse {
				return false, fmt.Errorf("node pool %s: invalid machine config: %s", pool, c.Message)
			}
			if c, ok := np.Status.Conditions.Get(api.NodePoolConditionReady); ok && c.Reason == nodePoolNoManagementCluster {
				return false, fmt.Errorf("node pool %s will get no machines: %s", pool, c.Message)
			}
			st := np.Status
			want := st.Replicas
			if np.Spec.Replicas != nil {
				want = *np.Spec.Replicas
			}
			return st.ObservedGeneration >= max(gen, np.Generation) && st.Replicas == want && st.ReadyReplicas == want &&
				st.UpdatedReplicas == want && (want == 0 || np.Status.Conditions.IsTrue(api.NodePoolConditionReady)), nil
		},
		detail: func(obs observation) string {
			np := obs.nodePool
			if np == nil {
				return "node pool not found yet"
			}
			line := fmt.Sprintf("%d/%d machines ready, %d updated", np.Status.ReadyReplicas, np.Status.Replicas, np.Status.UpdatedReplicas)
			for _, t := range []string{api.NodePoolConditionReachedIgnitionEndpoint, api.NodePoolConditionAllNodesHealthy, api.NodePoolConditionReady} {
				if c, ok := np.Status.Conditions.Get(t); ok && c.Status != api.ConditionTrue && c.Message != "" {
					return line + "; " + c.Message
				}
			}
			return line
		},
	}
}

// nodePoolGoneSpec waits until the pool answers 404.
func nodePoolGoneSpec(cluster, pool string) waitSpec {
	return waitSpec{
		goal: "deletion of node pool " + pool, cluster: cluster, nodePool: pool,
		done: func(obs observation) (bool, error) { return obs.nodePool == nil, nil },
		detail: func(obs observation) string {
			if obs.nodePool == nil {
				return "gone"
			}
			return fmt.Sprintf("%d machines left", obs.nodePool.Status.Replicas)
		},
	}
}
