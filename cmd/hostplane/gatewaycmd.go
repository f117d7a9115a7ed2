package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hostplane/hostplane/cmd/hostplane/gateway"
	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/httpapi"
	"github.com/hostplane/hostplane/pkg/mtls"
	"github.com/hostplane/hostplane/pkg/observe"
)

// backendEnv is the environment variable of daemon's backend URL.
func backendEnv(daemon string) string {
	return "HOSTPLANE_GATEWAY_" + strings.ToUpper(daemon) + "_URL"
}

func newGatewayCommand() *cobra.Command {
	var addr, logLevel, otlp, grafana string
	var backendTLS mtls.ClientConfig
	owners, err := gateway.Owners()
	if err != nil {
		panic(err) // the embedded OpenAPI document is checked by tests
	}
	backends := map[string]*string{}
	cmd := &cobra.Command{
		Use:   "gateway",
		Short: "Serve the API in front of separately running daemons, routing each path to the daemon that owns it",
		Long: "gateway routes every /v1 operation (and /ignition/{cluster}) to the daemon the OpenAPI document names as its owner,\n" +
			"passing the Authorization header through (each daemon checks tokens), and answers /healthz, /readyz (every daemon ready),\n" +
			"/metrics, /openapi.json and the web console (/ui) itself. docker compose and the Kubernetes manifests run it in front of the six daemons.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return usageError{err}
			}
			log := observe.NewLogger(os.Stderr, level).With("daemon", gateway.Name)
			cfg := gateway.Config{Backends: map[string]string{}, Logger: log, Registry: observe.NewRegistry(), GrafanaURL: grafana, BackendTLS: backendTLS}
			for name, u := range backends {
				cfg.Backends[name] = *u
			}
			ctx := cmd.Context()
			if otlp != "" {
				tp, err := observe.NewTracerProvider(ctx, observe.TracingConfig{ServiceName: gateway.Name, OTLPEndpoint: otlp})
				if err != nil {
					return err
				}
				defer func() { _ = tp.Shutdown(context.WithoutCancel(ctx)) }()
				cfg.TracerProvider = tp
			}
			h, err := gateway.New(cfg)
			if err != nil {
				return usageError{err}
			}
			srv := httpapi.NewServer(addr, h, log)
			log.Info("gateway listening", "addr", addr, "backends", cfg.Backends)
			if err := srv.Start(ctx); err != nil {
				return fmt.Errorf("gateway: %w", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "addr", daemon.Env("HOSTPLANE_GATEWAY_ADDR", "127.0.0.1:8080"), "listen address (HOSTPLANE_GATEWAY_ADDR)")
	for _, name := range owners {
		backends[name] = f.String(name+"-url", daemon.Env(backendEnv(name), ""), "base URL of "+name+"'s admin port, e.g. https://"+name+":8081, or its replicas' separated by commas: calls go to the ready one, the leader ("+backendEnv(name)+")")
	}
	f.StringVar(&backendTLS.CAFile, "backend-ca-file", daemon.Env("HOSTPLANE_GATEWAY_BACKEND_CA_FILE", ""),
		"management CA that verifies the daemons' certificates on https:// backend URLs (HOSTPLANE_GATEWAY_BACKEND_CA_FILE)")
	f.StringVar(&backendTLS.CertFile, "client-cert-file", daemon.Env("HOSTPLANE_GATEWAY_CLIENT_CERT_FILE", ""),
		"the gateway's client certificate, presented to the daemons; re-read when it changes (HOSTPLANE_GATEWAY_CLIENT_CERT_FILE)")
	f.StringVar(&backendTLS.KeyFile, "client-key-file", daemon.Env("HOSTPLANE_GATEWAY_CLIENT_KEY_FILE", ""), "its private key (HOSTPLANE_GATEWAY_CLIENT_KEY_FILE)")
	f.StringVar(&otlp, "otlp-endpoint", daemon.Env("HOSTPLANE_OTLP_ENDPOINT", ""), "OTLP/HTTP trace endpoint host:port (HOSTPLANE_OTLP_ENDPOINT)")
	f.StringVar(&grafana, "grafana-url", daemon.Env("HOSTPLANE_GRAFANA_URL", ""),
		"base URL of a Grafana with hostplane's dashboards; the web console (/ui) links into them (HOSTPLANE_GRAFANA_URL)")
	f.StringVar(&logLevel, "log-level", daemon.Env("HOSTPLANE_LOG_LEVEL", "info"), "debug, info, warn or error (HOSTPLANE_LOG_LEVEL)")
	return cmd
}
