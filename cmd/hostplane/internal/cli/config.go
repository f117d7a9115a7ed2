package cli

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/hostplane/hostplane/pkg/atomicfile"
)

// Config is the config file, $XDG_CONFIG_HOME/hostplane/config.yaml.
type Config struct {
	// Server is the API's base URL.
	Server string `json:"server,omitempty"`
	// Token is the bearer token.
	Token string `json:"token,omitempty"`
}

// configKeys are what `config set` accepts.
var configKeys = []string{"server", "token"}

// configPath returns the config file's path: --config, HOSTPLANE_CONFIG, else
// $XDG_CONFIG_HOME/hostplane/config.yaml (~/.config/hostplane/config.yaml).
func (o *Options) configFile() (string, error) {
	if p := cmp.Or(o.configPath, o.getenv("HOSTPLANE_CONFIG")); p != "" {
		return p, nil
	}
	dir := o.getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("cannot find the config directory: set XDG_CONFIG_HOME or HOME: %w", err)
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "hostplane", "config.yaml"), nil
}

// loadConfig reads the config file; a missing file is an empty config.
func (o *Options) loadConfig() (Config, string, error) {
	var cfg Config
	path, err := o.configFile()
	if err != nil {
		return cfg, "", err
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return cfg, path, nil
	}
	if err != nil {
		return cfg, path, fmt.Errorf("config file: %w", err)
	}
	if err := yaml.UnmarshalStrict(b, &cfg); err != nil {
		return cfg, path, fmt.Errorf("config file %s: %w", path, err)
	}
	return cfg, path, nil
}

func saveConfig(path string, cfg Config) error {
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("config dir: %w", err)
	}
	// The file holds a token: only its owner may read it.
	if err := atomicfile.Write(path, b, 0o600); err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	return nil
}

// redact hides all but the first 4 characters of a secret.
func redact(s string) string {
	if s == "" {
		return ""
	}
	if len(s) <= 8 {
		return "REDACTED"
	}
	return s[:4] + "…REDACTED"
}

// setConfig sets key (server or token) to value in the config file and returns the file's
// path.
func (o *Options) setConfig(cmd *cobra.Command, key, value string) (string, error) {
	cfg, path, err := o.loadConfig()
	if err != nil {
		return "", err
	}
	switch key {
	case "server":
		cfg.Server = value
	case "token":
		cfg.Token = value
	default:
		return "", usagef(cmd, "unknown key %q: want one of %s", key, strings.Join(configKeys, ", "))
	}
	return path, saveConfig(path, cfg)
}

func newConfigCommand(o *Options) *cobra.Command {
	set := &cobra.Command{
		Use:       "set server|token VALUE",
		Short:     "Set the server URL or the bearer token in the config file",
		Example:   "  hostplane config set server http://127.0.0.1:8080\n  hostplane config set token \"$(cat .hostplane/admin-token)\"",
		Args:      exactArgs("KEY (server or token)", "VALUE"),
		ValidArgs: configKeys,
		RunE: func(cmd *cobra.Command, args []string) error {
			key, value := args[0], strings.TrimSpace(args[1])
			path, err := o.setConfig(cmd, key, value)
			if err != nil {
				return err
			}
			shown := value
			if key == "token" {
				shown = redact(value)
			}
			fmt.Fprintf(o.Out, "%s set to %s in %s\n", key, shown, path)
			return nil
		},
	}
	set.ValidArgsFunction = func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) == 0 {
			return configKeys, cobra.ShellCompDirectiveNoFileComp
		}
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	unset := &cobra.Command{
		Use:               "unset server|token",
		Short:             "Remove the server URL or the bearer token from the config file",
		Args:              exactArgs("KEY (server or token)"),
		ValidArgsFunction: cobra.FixedCompletions(configKeys, cobra.ShellCompDirectiveNoFileComp),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := o.setConfig(cmd, args[0], "")
			if err != nil {
				return err
			}
			fmt.Fprintf(o.Out, "%s removed from %s\n", args[0], path)
			return nil
		},
	}
	view := &cobra.Command{
		Use:   "view",
		Short: "Print the config file (token redacted) and what the CLI will use",
		Args:  exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, path, err := o.loadConfig()
			if err != nil {
				return err
			}
			server, token, err := o.resolve()
			if err != nil {
				return err
			}
			fmt.Fprintf(o.Out, "# %s\n", path)
			shown := Config{Server: cfg.Server, Token: redact(cfg.Token)}
			b, _ := yaml.Marshal(shown)
			if string(b) == "{}\n" {
				b = []byte("# (empty)\n")
			}
			o.Out.Write(b)
			fmt.Fprintf(o.Out, "# in effect: server %s, token %s\n", server, cmp.Or(redact(token), "(none)"))
			return nil
		},
	}
	return group("config", "Show or change the config file (server and token)", set, unset, view)
}
