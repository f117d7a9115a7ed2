package dev

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hostplane/hostplane/pkg/ignition"
	"github.com/hostplane/hostplane/pkg/registry"
	"github.com/hostplane/hostplane/pkg/release"
)

// Guest images hostplane dev pushes to its registry: the sandbox image, the example
// workload and the pod network (cmd/hostplane/internal/guestimages), FROM scratch around one
// static binary each.
const (
	PauseRepo   = "hostplane/pause"
	EchoRepo    = "hostplane/echo"
	NetRepo     = "hostplane/netd"
	GuestTag    = "1"
	pauseBinary = "hostplane-pause"
	echoBinary  = "hostplane-echo"
	netBinary   = "hostplane-netd"
	// CoreDNSRepo is the DNS server of guest clusters on real nodes (componentd's addons),
	// tagged with its version: tools/coredns/build.sh's build of the CoreDNS that
	// tools/coredns/go.mod pins.
	CoreDNSRepo    = "hostplane/coredns"
	CoreDNSVersion = "v1.12.1"
)

// coreDNSBinary is where tools/coredns/build.sh (make coredns) puts CoreDNS.
func coreDNSBinary() string {
	return filepath.Join(release.CacheDir(), "coredns", CoreDNSVersion, "coredns")
}

// startRegistry starts the OCI registry real nodes pull from, on the infra host (where the
// machines reach the clusters' endpoints), and pushes the guest images into it. Without the
// registry binary (make registry) the stack runs without one and says so: real nodes then
// cannot start pods.
func (s *Stack) startRegistry(ctx context.Context) error {
	r, err := registry.Start(ctx, registry.Config{Dir: filepath.Join(s.cfg.DataDir, "registry"),
		Host: cmp.Or(s.cfg.InfraHost, "127.0.0.1"), Log: s.log.With("component", "registry")})
	if errors.Is(err, registry.ErrNotBuilt) {
		s.log.Warn("no OCI registry: real nodes cannot pull images", "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("registry: %w", err)
	}
	s.Registry = r
	dir := s.cfg.GuestImagesDir
	if dir == "" {
		if exe, err := os.Executable(); err == nil {
			dir = filepath.Dir(exe)
		}
	}
	for _, img := range []registry.Image{
		{Repo: PauseRepo, Tag: GuestTag, Files: map[string]string{"/pause": filepath.Join(dir, pauseBinary)}, Entrypoint: []string{"/pause"}},
		{Repo: EchoRepo, Tag: GuestTag, Files: map[string]string{"/echo": filepath.Join(dir, echoBinary)}, Entrypoint: []string{"/echo"}},
		{Repo: NetRepo, Tag: GuestTag, Files: map[string]string{"/netd": filepath.Join(dir, netBinary)}, Entrypoint: []string{"/netd"}},
		{Repo: CoreDNSRepo, Tag: CoreDNSVersion, Files: map[string]string{"/coredns": coreDNSBinary()}, Entrypoint: []string{"/coredns"}},
	} {
		d, err := r.Push(ctx, img)
		if err != nil {
			s.log.Warn("the registry lacks a guest image (make run builds its binary beside hostplane, make coredns CoreDNS)", "image", img.Repo, "err", err)
			continue
		}
		s.log.Info("pushed a guest image", "ref", r.Ref(img.Repo, img.Tag), "digest", d)
		switch img.Repo {
		case CoreDNSRepo:
			s.dnsImage = r.Ref(img.Repo, img.Tag)
		case NetRepo:
			s.netImage = r.Ref(img.Repo, img.Tag)
		}
	}
	return nil
}

// nodeRegistry is what ignitiond hands real nodes of the registry: its host, CA and
// credential; nil without a registry.
func (s *Stack) nodeRegistry() *ignition.Registry {
	if s.Registry == nil {
		return nil
	}
	user, pass := s.Registry.Credentials()
	return &ignition.Registry{Host: s.Registry.Host(), CAPEM: s.Registry.CAPEM(), Username: user, Password: pass}
}
