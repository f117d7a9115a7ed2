package dev

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/hostplane/hostplane/pkg/mgmtcluster"
	"github.com/hostplane/hostplane/pkg/release"
)

// Under the kubernetes runtime hostplane dev runs its management cluster with kubelet nodes
// (pkg/mgmtcluster), so the control planes' pods really run.
const (
	// ManagementClusterDir is the management cluster's directory under the data dir.
	ManagementClusterDir = "mgmt"
	// managementClusterName prefixes what the management cluster makes on the host (network
	// namespaces, links, cgroups, node names hpdev-n1, ...).
	managementClusterName = "hpdev"
	// DefaultManagementNodes: three, so a HighlyAvailable control plane's etcd members and
	// apiservers each get a node of their own (kuberuntime's required anti-affinity).
	DefaultManagementNodes = 3
	// spareVolumes unbound PersistentVolumes are kept ready for etcd members' claims (a
	// HighlyAvailable cluster claims 3).
	spareVolumes = 3
	volumeSize   = "10Gi"
)

// startKubeletManagement starts the management cluster the kubernetes runtime runs control
// planes on: the management apiserver, a scheduler and Config.ManagementNodes kubelet nodes,
// each a network namespace with its own containerd, with the images of every built release
// imported (FROM scratch around the cached binaries, no registry). Its apiserver's data and
// its volumes (the control planes' etcd data) stay in <data dir>/mgmt across restarts;
// everything else it changed on the host is undone when the stack stops (or by the next
// start, after a crash). It needs root and what `make kubelet mgmt-tools` installs.
func (s *Stack) startKubeletManagement(ctx context.Context) error {
	archives, cleanup, err := s.releaseImages()
	if err != nil {
		return err
	}
	defer cleanup()
	cfg := mgmtcluster.Config{Name: managementClusterName, Dir: filepath.Join(s.cfg.DataDir, ManagementClusterDir),
		Nodes: s.cfg.ManagementNodes, KeepData: true, Log: s.log}
	s.log.Info("starting the management cluster with kubelet nodes (the kubernetes runtime runs the control planes as their pods)",
		"nodes", cfg.Nodes, "dir", cfg.Dir, "images", len(archives))
	begin := time.Now()
	mc, err := mgmtcluster.Start(ctx, cfg, archives...)
	if err != nil {
		return fmt.Errorf("the management cluster the kubernetes runtime runs control planes on (kubelet nodes: as root, after `make kubelet mgmt-tools`): %w", err)
	}
	s.mgmtCluster, s.Management = mc, mc.APIServer()
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := mc.WaitNodesReady(wctx); err != nil {
		return fmt.Errorf("management nodes: %w", err)
	}
	vctx, stopVolumes := context.WithCancel(context.WithoutCancel(ctx))
	s.stopVolumes = stopVolumes
	s.volumesDone = make(chan struct{})
	go func() {
		defer close(s.volumesDone)
		mc.ProvisionVolumes(vctx, spareVolumes, volumeSize, 2*time.Second)
	}()
	s.useClusterDNS(mc.Resolver())
	s.log.Info("management cluster ready", "nodes", len(mc.Nodes()), "took", time.Since(begin).Round(time.Millisecond),
		"kubeconfig", mc.KubeconfigPath)
	return nil
}

// releaseImages writes the image archives of every release whose binaries are built, and
// returns them with a function that removes them. A release built later has no images
// until hostplane dev starts again: its pods wait with ErrImageNeverPull.
func (s *Stack) releaseImages() (archives []string, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "hostplane-dev-images-")
	if err != nil {
		return nil, nil, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	for _, v := range release.Versions() {
		rel, err := release.Lookup(v)
		if err != nil {
			cleanup()
			return nil, nil, err
		}
		if st := rel.State(); st != release.Built {
			s.log.Warn("release not built: its control planes cannot run as pods until hostplane dev starts again once it is", "release", v, "state", st)
			continue
		}
		vdir := filepath.Join(dir, v)
		if err := os.Mkdir(vdir, 0o700); err != nil {
			cleanup()
			return nil, nil, err
		}
		a, err := mgmtcluster.ReleaseImages(rel, vdir)
		if err != nil {
			cleanup()
			return nil, nil, fmt.Errorf("images of release %s: %w", v, err)
		}
		archives = append(archives, a...)
	}
	return archives, cleanup, nil
}

// useClusterDNS makes the process resolve names as the management cluster's pods do (after
// /etc/hosts): the daemons run on the host but reach each control plane at its Service name
// (kube-apiserver.hostplane-<cluster>.svc), as they do in deploy/k8s. Every other name is
// unknown to that DNS. Stop puts the resolver back.
func (s *Stack) useClusterDNS(r *net.Resolver) {
	preferGo, dial := net.DefaultResolver.PreferGo, net.DefaultResolver.Dial
	net.DefaultResolver.PreferGo, net.DefaultResolver.Dial = r.PreferGo, r.Dial
	s.restoreResolver = func() { net.DefaultResolver.PreferGo, net.DefaultResolver.Dial = preferGo, dial }
}

// stopKubeletManagement stops the volume provisioner and the management cluster.
func (s *Stack) stopKubeletManagement(ctx context.Context) {
	if s.stopVolumes != nil {
		s.stopVolumes()
		<-s.volumesDone
	}
	if s.restoreResolver != nil {
		s.restoreResolver()
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Minute)
	defer cancel()
	if err := s.mgmtCluster.Stop(ctx); err != nil {
		s.log.Warn("stop the management cluster", "err", err)
	}
}
