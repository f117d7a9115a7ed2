package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/hostplane/hostplane/pkg/certs"
	"github.com/hostplane/hostplane/pkg/client"
)

// defaultSealKeyFile is hostplane dev's seal key (its data dir's pki.key).
const defaultSealKeyFile = ".hostplane/pki.key"

func newPKICommand(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pki",
		Short: "Rotate the seal key that encrypts every cluster's private keys at rest",
		Long: `pkid seals the private keys and kubeconfigs of the pki bucket with an AES-256 key; the key
file (HOSTPLANE_PKI_KEY_FILE) holds one hex key a line: the first seals, every one opens.
Rotating it (docs/operations.md):

  hostplane pki key rotate --key-file pki.key   # a new key first; the old ones still open
  (give every daemon the new file: hostplane dev and mounted Secrets are re-read without a restart)
  hostplane pki reseal                          # pkid seals every record with the new key
  hostplane pki key prune --key-file pki.key    # drop the old keys; give every daemon the file again`,
	}
	reseal := action{
		do: func(cmd *cobra.Command, c *client.Client, _ []string) (step, error) {
			st, err := c.ResealPKI(cmd.Context())
			if err != nil {
				return step{}, err
			}
			said := fmt.Sprintf("%d records: %d sealed again, %d already sealed with the current key (pkid holds %d keys)",
				st.Records, st.Resealed, st.Current, st.Keys)
			if st.Resealed+st.Current == st.Records && st.Keys > 1 {
				said += "\nevery record is sealed with the current key: the older keys may be removed (hostplane pki key prune)"
			}
			return step{said: said}, nil
		},
	}.command(o, &cobra.Command{
		Use:   "reseal",
		Short: "Have pkid seal every PKI record again with the current seal key (POST /v1/pki/reseal)",
		Args:  exactArgs(),
	})
	var keyFile string
	key := &cobra.Command{Use: "key", Short: "Change the seal key file (locally: give the daemons the new file afterwards)"}
	key.PersistentFlags().StringVar(&keyFile, "key-file", defaultSealKeyFile, "the seal key file (hostplane dev's: <data dir>/pki.key)")
	// keyCommand changes the key file and says what it holds now.
	keyCommand := func(use, short string, change func(file string) (int, error), said func(n int) string) *cobra.Command {
		return &cobra.Command{
			Use: use, Short: short, Args: exactArgs(),
			RunE: func(cmd *cobra.Command, _ []string) error {
				n, err := change(keyFile)
				if err != nil {
					return err
				}
				fmt.Fprintln(o.Out, said(n))
				return nil
			},
		}
	}
	rotate := keyCommand("rotate", "Put a new random key first in the key file; the old keys still open what they sealed", certs.RotateSealKeyFile, func(n int) string {
		return fmt.Sprintf("%s holds %d keys; the new one seals from now on. Next: every daemon reads the file (within 30 s), then hostplane pki reseal", keyFile, n)
	})
	prune := keyCommand("prune", "Keep only the current key: run it after hostplane pki reseal answered that every record is sealed with it", certs.PruneSealKeyFile, func(n int) string {
		return fmt.Sprintf("removed %d old key(s) from %s", n, keyFile)
	})
	key.AddCommand(rotate, prune)
	cmd.AddCommand(reseal, key)
	return cmd
}
