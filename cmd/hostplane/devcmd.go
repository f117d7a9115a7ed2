package main

import (
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/hostplane/hostplane/cmd/hostplane/dev"
	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/observe"
	"github.com/hostplane/hostplane/services/componentd"
)

func newDevCommand() *cobra.Command {
	var cfg dev.Config
	var logLevel string
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run all of Hostplane in one process: NATS, a management apiserver, the six daemons and the API on one address",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return usageError{err}
			}
			cfg.Logger = observe.NewLogger(os.Stderr, level)
			ctx := cmd.Context()
			s, err := dev.Start(ctx, cfg)
			if err != nil {
				return err
			}
			var runErr error
			select {
			case <-ctx.Done():
			case runErr = <-s.Err():
			}
			s.Stop(ctx)
			return runErr
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.DataDir, "data-dir", daemon.Env("HOSTPLANE_DATA_DIR", ".hostplane"), "data directory; state survives restarts (HOSTPLANE_DATA_DIR)")
	f.StringVar(&cfg.Addr, "addr", daemon.Env("HOSTPLANE_ADDR", "127.0.0.1:8080"), "address of the HTTP API (HOSTPLANE_ADDR)")
	f.IntVar(&cfg.NATSPort, "nats-port", 4222, "port of the embedded NATS server (-1: any free port)")
	f.IntVar(&cfg.Replicas, "replicas", 1, "replicas of each daemon, in-process: one leads, the others stand by and take over when it stops (see docs/resilience.md)")
	f.StringVar(&cfg.InfraHost, "infra-host", daemon.Env("HOSTPLANE_INFRA_HOST", ""),
		"address of the clusters' endpoints and Ignition servers; real nodes in Docker containers need one they reach, e.g. the docker0 gateway 172.17.0.1 (HOSTPLANE_INFRA_HOST; default 127.0.0.1)")
	f.StringVar(&cfg.Runtime, "runtime", daemon.Env("HOSTPLANE_COMPONENTD_RUNTIME", componentd.RuntimeProcess),
		"control-plane runtime: process (child processes) or kubernetes (pods on a management cluster of kubelet nodes run here: root, after make kubelet mgmt-tools) (HOSTPLANE_COMPONENTD_RUNTIME)")
	f.IntVar(&cfg.ManagementNodes, "management-nodes", dev.DefaultManagementNodes, "kubelet nodes of the management cluster under the kubernetes runtime (1 to 8)")
	f.StringVar(&cfg.GrafanaURL, "grafana-url", daemon.Env("HOSTPLANE_GRAFANA_URL", ""),
		"base URL of a Grafana with hostplane's dashboards; the web console (/ui) links into them (HOSTPLANE_GRAFANA_URL)")
	f.StringVar(&logLevel, "log-level", daemon.Env("HOSTPLANE_LOG_LEVEL", "info"), "debug, info, warn or error")
	return cmd
}
