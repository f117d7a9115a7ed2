package mgmtcluster

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DescribePods returns, for a failing test's log, every pod of namespace ns with its node,
// phase and containers' states, and the last lines of each container's latest logs, read from
// the nodes' pod log directories (the apiserver cannot reach the kubelets by their node
// names, so `kubectl logs` does not work here).
func (c *Cluster) DescribePods(ctx context.Context, ns string, lines int) string {
	cs, err := c.Clientset()
	if err != nil {
		return err.Error()
	}
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Sprintf("pods of %s: %v", ns, err)
	}
	var b strings.Builder
	for _, p := range pods.Items {
		var states []string
		for _, s := range p.Status.ContainerStatuses {
			states = append(states, fmt.Sprintf("%s ready=%v restarts=%d %+v", s.Name, s.Ready, s.RestartCount, s.State))
		}
		fmt.Fprintf(&b, "pod %s/%s on %s at %s: %s deleting=%v %s\n", ns, p.Name, p.Spec.NodeName, p.Status.PodIP,
			p.Status.Phase, p.DeletionTimestamp != nil, strings.Join(states, "; "))
		n := c.NodeNamed(p.Spec.NodeName)
		if n == nil {
			continue
		}
		for _, ct := range append(p.Spec.InitContainers, p.Spec.Containers...) {
			// <node dir>/pods-logs/<namespace>_<pod>_<uid>/<container>/<restart>.log
			logs, _ := filepath.Glob(filepath.Join(n.Dir, "pods-logs", ns+"_"+p.Name+"_"+string(p.UID), ct.Name, "*.log"))
			slices.Sort(logs)
			if len(logs) > 2 {
				logs = logs[len(logs)-2:]
			}
			for _, l := range logs {
				fmt.Fprintf(&b, "--- end of %s ---\n%s\n", l, tailFile(l, lines))
			}
		}
	}
	return b.String()
}
