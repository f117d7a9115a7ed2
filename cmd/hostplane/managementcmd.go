package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"

	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/kube"
	"github.com/hostplane/hostplane/pkg/localkube"
	"github.com/hostplane/hostplane/pkg/observe"
	"github.com/hostplane/hostplane/pkg/process"
)

// managementKubeconfig is the admin kubeconfig localkube writes into the management dir.
const managementKubeconfig = "admin.kubeconfig"

func newManagementCommand() *cobra.Command {
	var cfg localkube.Config
	var logLevel string
	var check bool
	cmd := &cobra.Command{
		Use:   "management",
		Short: "Run a management cluster's etcd, kube-apiserver and kube-controller-manager (what docker compose runs; hostplane dev starts its own)",
		Long: "management runs etcd, kube-apiserver and kube-controller-manager (its garbage collector and namespace controller)\n" +
			"of the newest release under a supervisor, with their state in --dir,\n" +
			"and writes an admin kubeconfig to <dir>/" + managementKubeconfig + " for the daemons (HOSTPLANE_MANAGEMENT_KUBECONFIG).\n" +
			"A restart on the same dir resumes on the same ports. With --check it only reports, by its exit code,\n" +
			"whether a running one answers /readyz (a container health check).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if check {
				return checkManagement(ctx, filepath.Join(cfg.Dir, managementKubeconfig))
			}
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return usageError{err}
			}
			log := observe.NewLogger(os.Stderr, level).With("daemon", "management")
			sup, err := process.NewSupervisor(filepath.Join(cfg.Dir, "run"), log)
			if err != nil {
				return err
			}
			cfg.Supervisor, cfg.Name, cfg.Log = sup, "management", log
			cfg.Controllers = localkube.ManagementControllers
			c, err := localkube.Start(ctx, cfg)
			if err != nil {
				_ = sup.StopAll(context.WithoutCancel(ctx))
				return fmt.Errorf("management kube-apiserver: %w", err)
			}
			log.Info("management kube-apiserver ready", "url", c.URL, "kubeconfig", c.KubeconfigPath)
			<-ctx.Done()
			stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			return sup.StopAll(stop)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Dir, "dir", daemon.Env("HOSTPLANE_DATA_DIR", ".hostplane/management"), "state: certificates, etcd data, logs, kubeconfig (HOSTPLANE_DATA_DIR)")
	f.StringVar(&cfg.Host, "host", "127.0.0.1", "address kube-apiserver binds to and advertises")
	f.IntVar(&cfg.APIServerPort, "port", 6443, "kube-apiserver's port (0: a free one, kept across restarts)")
	f.IntVar(&cfg.EtcdClientPort, "etcd-client-port", 2379, "etcd's client port on 127.0.0.1")
	f.IntVar(&cfg.EtcdPeerPort, "etcd-peer-port", 2380, "etcd's peer port on 127.0.0.1")
	f.BoolVar(&check, "check", false, "exit 0 if the management kube-apiserver of --dir answers /readyz, 1 if not")
	f.StringVar(&logLevel, "log-level", daemon.Env("HOSTPLANE_LOG_LEVEL", "info"), "debug, info, warn or error (HOSTPLANE_LOG_LEVEL)")
	return cmd
}

// checkManagement asks the kube-apiserver of kubeconfig for /readyz.
func checkManagement(ctx context.Context, kubeconfig string) error {
	raw, err := os.ReadFile(kubeconfig)
	if err != nil {
		return err
	}
	rc, err := kube.RESTConfig(raw)
	if err != nil {
		return err
	}
	rc.Timeout = 3 * time.Second
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("management kube-apiserver not ready: %w (%s)", err, body)
	}
	return nil
}
