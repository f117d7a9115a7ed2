package main

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/hostplane/hostplane/cmd/hostplane/dev"
	"github.com/hostplane/hostplane/pkg/auth"
	"github.com/hostplane/hostplane/pkg/certs"
	"github.com/hostplane/hostplane/pkg/daemon"
	"github.com/hostplane/hostplane/pkg/mtls"
	"github.com/hostplane/hostplane/pkg/natsauth"
	"github.com/hostplane/hostplane/pkg/observe"
)

// defaultCredsDir is where hostplane dev keeps its NATS identities (its default data dir).
var defaultCredsDir = filepath.Join(".hostplane", dev.NATSCredsDir)

func newCredentialsCommand() *cobra.Command {
	f := &credsFlags{}
	cmd := &cobra.Command{
		Use:     "credentials",
		Aliases: []string{"creds"},
		Short:   "Mint, list and revoke NATS identities (nkeys) for other systems; lay out NATS for the daemons",
		Long: `Every client of hostplane's NATS proves an nkey identity, and the server lets each do only
what pkg/natsauth's table allows (docs/security.md). The daemons' identities are built in; other
systems get identities of their own:

  inbox-publisher  may only publish inbound events, hostplane.in.<cluster>.>, optionally for a
                   list of clusters (--cluster, repeatable)
  event-consumer   may only read hostplane.evt.> through its own durable consumer, named after it

Seeds are files <dir>/<name>.nk (mode 0600, the nats CLI's --nkey format); <dir>/auth.conf is the
nats-server configuration to include. hostplane dev applies a change within a second; a
standalone nats-server (docker compose, Kubernetes) on a configuration reload (SIGHUP).`,
	}
	cmd.PersistentFlags().StringVar(&f.dir, "dir", daemon.Env("HOSTPLANE_NATS_CREDS_DIR", defaultCredsDir),
		"credentials directory: hostplane dev's is <data dir>/"+dev.NATSCredsDir+" (HOSTPLANE_NATS_CREDS_DIR)")
	cmd.PersistentFlags().StringVar(&f.tls.CAFile, "nats-ca-file", daemon.Env("HOSTPLANE_NATS_CA_FILE", ""),
		"CA of the NATS server's certificate (HOSTPLANE_NATS_CA_FILE; default: hostplane dev's <data dir>/"+dev.NATSTLSDir+"/"+natsauth.TLSCAFile+" beside --dir when it exists)")
	cmd.PersistentFlags().StringVar(&f.tls.CertFile, "nats-cert-file", daemon.Env("HOSTPLANE_NATS_CERT_FILE", ""), "client certificate for NATS mutual TLS (HOSTPLANE_NATS_CERT_FILE)")
	cmd.PersistentFlags().StringVar(&f.tls.KeyFile, "nats-key-file", daemon.Env("HOSTPLANE_NATS_KEY_FILE", ""), "its private key (HOSTPLANE_NATS_KEY_FILE)")
	cmd.AddCommand(newCredsCreateCommand(f), newCredsRevokeCommand(f), newCredsListCommand(f),
		newCredsInitCommand(f), newCredsBootstrapCommand(f), newCredsK8sSecretsCommand(f))
	return cmd
}

// credsFlags are the credentials command's persistent flags, shared by its subcommands.
type credsFlags struct {
	dir string
	tls natsauth.TLS
}

// clientTLS is the TLS NATS clients use: the flags, with the CA of hostplane dev's data dir
// beside --dir when no CA is given and it exists.
func (f *credsFlags) clientTLS() natsauth.TLS {
	t := f.tls
	if t.CAFile == "" {
		ca := filepath.Join(filepath.Dir(f.dir), dev.NATSTLSDir, natsauth.TLSCAFile)
		if fi, err := os.Stat(ca); err == nil && fi.Mode().IsRegular() {
			t.CAFile = ca
		}
	}
	return t
}

// newCredsCreateCommand mints an identity for another system.
func newCredsCreateCommand(f *credsFlags) *cobra.Command {
	var clusters []string
	create := &cobra.Command{
		Use:   "create (inbox-publisher|event-consumer) NAME",
		Short: "Mint an identity for another system and print how to use it",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := natsauth.Mint(f.dir, natsauth.Minted{Kind: args[0], Name: args[1], Clusters: clusters})
			if err != nil {
				return usageError{err}
			}
			printMinted(cmd.OutOrStdout(), c, f.clientTLS(), args[0], args[1], clusters)
			return nil
		},
	}
	create.Flags().StringSliceVar(&clusters, "cluster", nil, "inbox-publisher: a cluster it may send events for (repeatable; none: every cluster)")
	return create
}

// newCredsRevokeCommand revokes a minted identity.
func newCredsRevokeCommand(f *credsFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke NAME",
		Short: "Revoke an identity minted for another system: its seed is deleted and the server refuses it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := natsauth.Revoke(f.dir, args[0]); err != nil {
				return usageError{err}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "revoked %s: hostplane dev refuses it within a second (and closes its connections); a standalone nats-server once it reloads its configuration (SIGHUP)\n", args[0])
			return nil
		},
	}
}

// newCredsListCommand lists the minted identities.
func newCredsListCommand(f *credsFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the identities minted for other systems",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			minted, err := natsauth.ListMinted(f.dir)
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tKIND\tCLUSTERS\tCREATED")
			for _, m := range minted {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", m.Name, m.Kind, cmp.Or(strings.Join(m.Clusters, ","), "*"), m.Created.Format(time.RFC3339))
			}
			return w.Flush()
		},
	}
}

// newCredsInitCommand creates the built-in identities, the seal key and, on request, the TLS material.
func newCredsInitCommand(f *credsFlags) *cobra.Command {
	var tlsHosts, tlsRouteHosts, mgmtHosts []string
	var sealKeyFile string
	initCmd := &cobra.Command{
		Use:   "init",
		Short: "Create the built-in identities' seeds (kept if they exist) and write auth.conf for nats-server; with --tls-host, a NATS CA and server certificate too",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(tlsRouteHosts) > 0 && len(tlsHosts) == 0 {
				return usageError{fmt.Errorf("--tls-route-host needs --tls-host: routes are TLS only where clients are")}
			}
			out := cmd.OutOrStdout()
			c, err := natsauth.Generate(f.dir)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "seeds and %s in %s\n", natsauth.ServerConfigFile, c.Dir)
			seal := sealKeyPath(f.dir, sealKeyFile)
			if _, err := certs.LoadOrCreateSealKey(seal); err != nil {
				return err
			}
			fmt.Fprintf(out, "seal key %s (kept once made)\n", seal)
			lc := filepath.Join(f.dir, localCloudTokenFile)
			if _, _, err := auth.LoadOrCreateTokenFile(lc, 0o600); err != nil {
				return err
			}
			fmt.Fprintf(out, "local cloud token %s (kept once made; infrad and the local cloud read it)\n", lc)
			// Group-readable: Prometheus reads it as a member of the daemons' group.
			mt := filepath.Join(f.dir, metricsTokenFile)
			if _, _, err := auth.LoadOrCreateTokenFile(mt, 0o640); err != nil {
				return err
			}
			fmt.Fprintf(out, "metrics token %s (kept once made; role metrics: the daemons accept it on /metrics only, Prometheus scrapes with it)\n", mt)
			if err := initMgmtTLS(out, f.dir, mgmtHosts); err != nil {
				return err
			}
			return initNATSTLS(out, f.dir, tlsHosts, tlsRouteHosts)
		},
	}
	initCmd.Flags().StringSliceVar(&tlsHosts, "tls-host", nil, "also make (once; renewed before expiry) a NATS CA and a server certificate for this host name or IP under <dir>/"+credsTLSDir+" (repeatable)")
	initCmd.Flags().StringSliceVar(&mgmtHosts, "mgmt-tls-host", nil, "also make (once; renewed before expiry) a management CA under <dir>/"+credsMgmtTLSDir+
		", a server certificate per daemon for its name and this host name or IP ("+mtls.DaemonPlaceholder+" stands for the daemon's name) and the gateway's client certificate (repeatable)")
	initCmd.PersistentFlags().StringVar(&sealKeyFile, "seal-key-file", "", "the seal key pkid encrypts private keys with, made once (default <dir>/"+sealKeyFileName+")")
	initCmd.Flags().StringSliceVar(&tlsRouteHosts, "tls-route-host", nil, "also make a certificate for the NATS cluster routes (server and client, same CA) for this host name (a wildcard such as *.nats-headless covers a StatefulSet's members) (repeatable)")
	return initCmd
}

// initMgmtTLS makes (once) the management CA, a server certificate per daemon for hosts and
// the gateway's client certificate; nothing without hosts.
func initMgmtTLS(out io.Writer, dir string, hosts []string) error {
	if len(hosts) == 0 {
		return nil
	}
	files, err := mtls.Generate(filepath.Join(dir, credsMgmtTLSDir), daemonNames(), hosts)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "management TLS: CA %s, a server certificate per daemon for its name and %s, the gateway's client certificate\n",
		files.CAFile(), strings.Join(hosts, ", "))
	return nil
}

// initNATSTLS makes (once) the NATS CA and a server certificate for hosts, and a route
// certificate for routeHosts; nothing without hosts.
func initNATSTLS(out io.Writer, dir string, hosts, routeHosts []string) error {
	if len(hosts) == 0 {
		return nil
	}
	files, err := natsauth.GenerateTLS(filepath.Join(dir, credsTLSDir), hosts...)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "TLS: CA %s, server certificate %s for %s\n", files.CAFile(), files.Server().CertFile, strings.Join(hosts, ", "))
	if len(routeHosts) == 0 {
		return nil
	}
	if _, err := natsauth.GenerateRouteTLS(files.Dir, routeHosts...); err != nil {
		return err
	}
	fmt.Fprintf(out, "TLS: route certificate %s for %s\n", filepath.Join(files.Dir, natsauth.TLSRouteCertFile), strings.Join(routeHosts, ", "))
	return nil
}

// newCredsBootstrapCommand lays out the shared streams and buckets as the bootstrap identity.
func newCredsBootstrapCommand(f *credsFlags) *cobra.Command {
	var natsURL string
	var replicas int
	var wait time.Duration
	bootstrap := &cobra.Command{
		Use:   "bootstrap",
		Short: "Create or update the shared streams and the six buckets as the bootstrap identity (run before the daemons start)",
		Long: `With NATS permissions on, no daemon may create the shared streams (HOSTPLANE_EVENTS,
HOSTPLANE_INBOX) or another daemon's bucket: this does it once, as the bootstrap identity, waiting
up to --wait for the server. It is idempotent; docker compose runs it before the daemons.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), wait)
			defer cancel()
			log := observe.NewLogger(cmd.ErrOrStderr(), slog.LevelInfo)
			if err := natsauth.LayOut(ctx, natsURL, filepath.Join(f.dir, natsauth.Bootstrap+natsauth.SeedExt), f.clientTLS(), replicas, log); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "streams and buckets ready on %s (%d replica(s))\n", natsURL, replicas)
			return nil
		},
	}
	bootstrap.Flags().StringVar(&natsURL, "nats-url", daemon.Env("HOSTPLANE_NATS_URL", "nats://127.0.0.1:4222"), "NATS server (HOSTPLANE_NATS_URL)")
	bootstrap.Flags().IntVar(&replicas, "replicas", 1, "copies of each stream and bucket: 1 on one server, 3 on a 3-server cluster")
	bootstrap.Flags().DurationVar(&wait, "wait", 2*time.Minute, "how long to wait for the server")
	return bootstrap
}

// newCredsK8sSecretsCommand prints the Secrets deploy/k8s mounts.
func newCredsK8sSecretsCommand(f *credsFlags) *cobra.Command {
	var namespace, sealKeyFile string
	k8sSecrets := &cobra.Command{
		Use:   "k8s-secrets",
		Short: "Print the Kubernetes Secrets deploy/k8s needs: nats-auth, nats-tls, nats-creds-<identity>, hostplane-seal-key, localcloud-token, hostplane-metrics-token and mgmt-tls-<daemon|gateway>",
		Long: `Prints, as YAML for kubectl apply -f -, the Secrets deploy/k8s mounts: nats-auth (the
server's auth.conf, in every NATS member), nats-tls (the NATS CA certificate, the server's and
the routes' certificates and keys, in every NATS member; never the CA's key) and
nats-creds-<identity> (key nkey: that identity's seed; key ca.crt: the NATS CA it verifies the
server with) for the bootstrap Job and each daemon, so a pod holds only its own seed;
hostplane-seal-key (key pki.key: the seal key, for the daemons that open sealed PKI),
localcloud-token (key token: the local cloud's API token, for it and infrad in the dev overlay),
hostplane-metrics-token (key token: the token of role metrics the daemons accept on /metrics
and the ServiceMonitors scrape with) and
mgmt-tls-<daemon> and mgmt-tls-gateway (tls.crt, tls.key, ca.crt: the admin port's certificate,
or the gateway's client certificate, and the management CA). The admin seed, other systems'
seeds and the CA keys stay in --dir. Run init (or create/revoke) first:

  hostplane credentials init --dir nats-creds \
    --tls-host nats --tls-host nats.hostplane-system.svc \
    --tls-route-host '*.nats-headless' --tls-route-host '*.nats-headless.hostplane-system.svc' \
    --mgmt-tls-host '{daemon}.hostplane-system.svc'
  hostplane credentials k8s-secrets --dir nats-creds | kubectl apply -f -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := natsauth.Generate(f.dir)
			if err != nil {
				return err
			}
			docs, err := k8sCredentialSecrets(c, namespace, sealKeyPath(f.dir, sealKeyFile))
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(docs)
			return err
		},
	}
	k8sSecrets.Flags().StringVar(&sealKeyFile, "seal-key-file", "", "the seal key init made (default <dir>/"+sealKeyFileName+")")
	k8sSecrets.Flags().StringVar(&namespace, "namespace", "hostplane-system", "namespace of the Secrets")
	return k8sSecrets
}

// credsMgmtTLSDir is where `credentials init --mgmt-tls-host` writes the management CA and
// the daemons' and gateway's certificates, under the credentials directory.
const credsMgmtTLSDir = "mgmt-tls"

// Tokens in the credentials directory, and their Secrets (key k8sTokenKey) in deploy/k8s:
// the local cloud's API token (the shared secret of infrad and the local cloud) and the
// metrics token (role metrics: Prometheus's, which the daemons accept on /metrics only).
const (
	localCloudTokenFile      = "localcloud.token"
	k8sLocalCloudTokenSecret = "localcloud-token"
	metricsTokenFile         = "metrics.token"
	k8sMetricsTokenSecret    = "hostplane-metrics-token"
	k8sTokenKey              = "token"
)

// sealKeyFileName is the seal key's file in the credentials directory, unless
// --seal-key-file says otherwise.
const sealKeyFileName = "pki.key"

func sealKeyPath(dir, flag string) string {
	return cmp.Or(flag, filepath.Join(dir, sealKeyFileName))
}

// daemonNames are the six daemons, in natsauth's table order.
func daemonNames() []string {
	var out []string
	for _, d := range natsauth.Daemons {
		out = append(out, d.Name)
	}
	return out
}

// credsTLSDir is where `credentials init --tls-host` writes the NATS CA and server
// certificate, under the credentials directory.
const credsTLSDir = "tls"

// The Secrets of deploy/k8s: nats-auth (auth.conf), nats-tls (the NATS members' CA,
// certificates and keys) and nats-creds-<identity> (the seed under key nkey, the CA under
// ca.crt).
const (
	k8sSecretPrefix = "nats-creds-"
	k8sSeedKey      = "nkey"
	k8sAuthSecret   = "nats-auth"
	k8sTLSSecret    = "nats-tls"
	// The seal key (key pki.key) and the management TLS of each daemon and the gateway
	// (mgmt-tls-<name>: tls.crt, tls.key, ca.crt).
	k8sSealKeySecret  = "hostplane-seal-key"
	k8sMgmtTLSPrefix  = "mgmt-tls-"
	k8sMgmtTLSCert    = "tls.crt"
	k8sMgmtTLSKey     = "tls.key"
	k8sSealKeyFileKey = "pki.key"
)

// k8sCredentialSecrets renders the Secrets of deploy/k8s from c: nats-auth, nats-tls (from
// c's tls directory, without the CA key) and one nats-creds-<identity> for bootstrap and
// every daemon.
func k8sCredentialSecrets(c *natsauth.Credentials, namespace, sealKeyFile string) ([]byte, error) {
	authConf, err := os.ReadFile(filepath.Join(c.Dir, natsauth.ServerConfigFile))
	if err != nil {
		return nil, err
	}
	secret := func(name string, data map[string][]byte) corev1.Secret {
		return corev1.Secret{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{"app.kubernetes.io/part-of": "hostplane"}},
			Type:       corev1.SecretTypeOpaque,
			Data:       data,
		}
	}
	tlsData := map[string][]byte{}
	tlsDir := filepath.Join(c.Dir, credsTLSDir)
	for _, f := range []string{natsauth.TLSCAFile, natsauth.TLSCertFile, natsauth.TLSKeyFile, natsauth.TLSRouteCertFile, natsauth.TLSRouteKeyFile} {
		b, err := os.ReadFile(filepath.Join(tlsDir, f))
		if err != nil {
			return nil, fmt.Errorf("deploy/k8s runs NATS with TLS on clients and routes: %w (run credentials init with --tls-host and --tls-route-host first)", err)
		}
		tlsData[f] = b
	}
	out := []corev1.Secret{
		secret(k8sAuthSecret, map[string][]byte{natsauth.ServerConfigFile: authConf}),
		secret(k8sTLSSecret, tlsData),
	}
	names := append([]string{natsauth.Bootstrap}, daemonNames()...)
	for _, name := range names {
		seed, err := os.ReadFile(c.SeedFile(name))
		if err != nil {
			return nil, err
		}
		out = append(out, secret(k8sSecretPrefix+name, map[string][]byte{k8sSeedKey: seed, natsauth.TLSCAFile: tlsData[natsauth.TLSCAFile]}))
	}
	sealKey, err := os.ReadFile(sealKeyFile)
	if err != nil {
		return nil, fmt.Errorf("deploy/k8s reads the seal key from a Secret: %w (run credentials init first)", err)
	}
	out = append(out, secret(k8sSealKeySecret, map[string][]byte{k8sSealKeyFileKey: sealKey}))
	for _, t := range []struct{ file, secretName, why string }{
		{localCloudTokenFile, k8sLocalCloudTokenSecret, "the dev overlay's local cloud and infrad share a token"},
		{metricsTokenFile, k8sMetricsTokenSecret, "the daemons serve /metrics to the ServiceMonitors' token"},
	} {
		b, err := os.ReadFile(filepath.Join(c.Dir, t.file))
		if err != nil {
			return nil, fmt.Errorf("%s: %w (run credentials init first)", t.why, err)
		}
		out = append(out, secret(t.secretName, map[string][]byte{k8sTokenKey: b}))
	}
	mgmt := filepath.Join(c.Dir, credsMgmtTLSDir)
	ca, err := os.ReadFile(filepath.Join(mgmt, certs.CACertFile))
	if err != nil {
		return nil, fmt.Errorf("deploy/k8s serves the daemons' admin ports over mutual TLS: %w (run credentials init with --mgmt-tls-host first)", err)
	}
	for _, name := range append(daemonNames(), "gateway") {
		data := map[string][]byte{natsauth.TLSCAFile: ca}
		for key, file := range map[string]string{k8sMgmtTLSCert: name + ".crt", k8sMgmtTLSKey: name + ".key"} {
			if data[key], err = os.ReadFile(filepath.Join(mgmt, file)); err != nil {
				return nil, fmt.Errorf("management TLS: %w (run credentials init with --mgmt-tls-host)", err)
			}
		}
		out = append(out, secret(k8sMgmtTLSPrefix+name, data))
	}
	var buf bytes.Buffer
	for _, s := range out {
		b, err := yaml.Marshal(s)
		if err != nil {
			return nil, err
		}
		buf.WriteString("---\n")
		buf.Write(b)
	}
	return buf.Bytes(), nil
}

// printMinted says where the seed is and how to use it with the nats CLI.
func printMinted(w io.Writer, c *natsauth.Credentials, tls natsauth.TLS, kind, name string, clusters []string) {
	seed := c.SeedFile(name)
	fmt.Fprintf(w, "identity  %s (%s)\npublic    %s\nseed      %s (mode 0600; keep it secret)\n", name, kind, c.PublicKey(name), seed)
	common := fmt.Sprintf("nats --server nats://127.0.0.1:4222 --nkey %s --inbox-prefix %s", seed, natsauth.InboxPrefix(name))
	if tls.CAFile != "" {
		common = fmt.Sprintf("nats --server tls://127.0.0.1:4222 --tlsca %s --nkey %s --inbox-prefix %s", tls.CAFile, seed, natsauth.InboxPrefix(name))
	}
	if tls.CertFile != "" {
		common += fmt.Sprintf(" --tlscert %s --tlskey %s", tls.CertFile, tls.KeyFile)
	}
	switch kind {
	case natsauth.KindInboxPublisher:
		cluster := "<cluster>"
		if len(clusters) > 0 {
			cluster = clusters[0]
		}
		fmt.Fprintf(w, "send      %s pub hostplane.in.%s.<type> '<event JSON>'\n", common, cluster)
	case natsauth.KindEventConsumer:
		fmt.Fprintf(w, "read      %s consumer add HOSTPLANE_EVENTS %s --pull --deliver all --ack explicit --defaults\n          %s consumer next HOSTPLANE_EVENTS %s --count 10\n", common, name, common, name)
	}
	fmt.Fprintln(w, "hostplane dev accepts it within a second; a standalone nats-server once it reloads its configuration (SIGHUP).")
}
