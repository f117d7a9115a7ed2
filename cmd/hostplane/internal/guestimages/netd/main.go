// Command netd is the pod network of guest clusters on real nodes (componentd runs it as the
// DaemonSet kube-system/hostplane-netd; hostplane dev pushes it to its registry as
// hostplane/netd). On every node it
//
//   - writes the CNI configuration of the node's pod range (kube-controller-manager
//     allocates one to each Node): a bridge with host-local addresses, so the node turns
//     Ready only once its pods can be addressed;
//   - routes every other node's range through that node's internal address, so that pods
//     on different nodes reach each other with their own addresses (the nodes share a
//     network, as a Docker network's containers or one rack's machines do);
//   - masquerades what the node's pods send outside the cluster's pod network.
//
// It runs in the node's network namespace (hostNetwork) with NET_ADMIN, reading Nodes with
// its pod's in-cluster credential.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

func main() {
	clusterCIDR := flag.String("cluster-cidr", "", "the cluster's pod network (spec.networking.podCIDR)")
	confDir := flag.String("cni-conf-dir", "/etc/cni/net.d", "where the container runtime reads CNI configuration")
	resync := flag.Duration("resync", 30*time.Second, "how often routes and rules are checked even when no Node changed")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(log, *clusterCIDR, *confDir, os.Getenv("NODE_NAME"), *resync); err != nil {
		log.Error("netd stops", "err", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger, clusterCIDR, confDir, self string, resync time.Duration) error {
	cluster, err := netip.ParsePrefix(clusterCIDR)
	if err != nil {
		return fmt.Errorf("--cluster-cidr %q is not a CIDR: %w", clusterCIDR, err)
	}
	if self == "" {
		return fmt.Errorf("$NODE_NAME is empty: the pod must name its node (fieldRef spec.nodeName)")
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return err
	}
	cfg.UserAgent = "hostplane-netd"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	factory := informers.NewSharedInformerFactory(cs, 0)
	nodes := factory.Core().V1().Nodes()
	changed := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	if _, err := nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: poke, UpdateFunc: func(_, n any) { poke(n) }, DeleteFunc: poke,
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	// Until the cache holds every Node, a plan would drop the routes of nodes not read yet.
	if !cache.WaitForCacheSync(ctx.Done(), nodes.Informer().HasSynced) {
		return ctx.Err()
	}
	log.Info("netd runs", "node", self, "clusterCIDR", cluster)
	n := &netd{log: log, self: self, cluster: cluster.Masked(), confDir: confDir, nodes: nodes.Lister()}
	tick := time.NewTicker(resync)
	defer tick.Stop()
	for {
		n.sync()
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-tick.C:
		}
	}
}

// netd keeps one node's pod network as the cluster's Nodes say it should be.
type netd struct {
	log     *slog.Logger
	self    string
	cluster netip.Prefix
	confDir string
	nodes   listersv1.NodeLister
	// podCIDR is the range whose configuration and rule are in place.
	podCIDR netip.Prefix
}

func (n *netd) sync() {
	all, err := n.nodes.List(labels.Everything())
	if err != nil {
		n.log.Error("list nodes", "err", err)
		return
	}
	p := makePlan(n.self, all)
	// Routes first: a node with no range of its own yet still reaches the others' pods.
	if c, err := syncRoutes(p.routes); err != nil {
		n.log.Error("routes", "err", err)
	} else if c > 0 {
		n.log.Info("routes changed", "changes", c, "routes", sortedPrefixes(p.routes))
	}
	if !p.podCIDR.IsValid() {
		if n.podCIDR.IsValid() {
			n.log.Warn("the node lost its pod range; its configuration stays", "was", n.podCIDR)
		} else {
			n.log.Info("waiting for the node's pod range (kube-controller-manager --allocate-node-cidrs)", "node", n.self)
		}
		return
	}
	if !n.cluster.Contains(p.podCIDR.Addr()) {
		n.log.Error("the node's pod range is outside the cluster's pod network", "podCIDR", p.podCIDR, "clusterCIDR", n.cluster)
		return
	}
	if err := syncMasquerade(p.podCIDR, n.cluster); err != nil {
		n.log.Error("masquerade", "err", err)
		return
	}
	conf, err := cniConfig(p.podCIDR)
	if err != nil {
		n.log.Error("CNI config", "err", err)
		return
	}
	wrote, err := writeCNIConfig(n.confDir, conf)
	if err != nil {
		n.log.Error("write CNI config", "dir", n.confDir, "err", err)
		return
	}
	if wrote || n.podCIDR != p.podCIDR {
		n.log.Info("pod network configured", "podCIDR", p.podCIDR, "wroteCNIConfig", wrote)
	}
	n.podCIDR = p.podCIDR
}
