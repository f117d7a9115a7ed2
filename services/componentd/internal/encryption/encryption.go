// Package encryption renders kube-apiserver's EncryptionConfiguration
// (apiserver.config.k8s.io/v1, --encryption-provider-config) from the Secret encryption keys
// pkid keeps in a cluster's PKI record. Both runtimes of componentd use it: the process
// runtime writes it into the cluster's directory, the kubernetes runtime into a Secret.
package encryption

import (
	"encoding/base64"
	"errors"
	"fmt"

	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
	"sigs.k8s.io/yaml"

	"github.com/hostplane/hostplane/pkg/api"
)

// Resources are what the guest's kube-apiserver encrypts.
var Resources = []string{"secrets"}

// ErrUnsupportedType is returned for keys of a provider componentd cannot configure.
var ErrUnsupportedType = errors.New("unsupported secret encryption type")

// Opener opens what pkid sealed (certs.SealKey).
type Opener interface {
	Open(sealed []byte) ([]byte, error)
}

// Config renders the EncryptionConfiguration for keys, opening each key with o: one
// resource rule for Resources whose providers are aescbc with every key in keys' order (the
// first encrypts new writes, all decrypt), then identity, so values written before
// encryption was on (stored in plaintext) stay readable. It returns nil, nil when keys is
// nil or empty: kube-apiserver then runs without encryption.
func Config(keys *api.EncryptionKeys, o Opener) ([]byte, error) {
	if keys == nil || len(keys.Keys) == 0 {
		return nil, nil
	}
	if keys.Type != api.SecretEncryptionAESCBC {
		return nil, fmt.Errorf("%w %q", ErrUnsupportedType, keys.Type)
	}
	aes := &apiserverv1.AESConfiguration{Keys: make([]apiserverv1.Key, 0, len(keys.Keys))}
	for _, k := range keys.Keys {
		secret, err := o.Open(k.Sealed)
		if err != nil {
			return nil, fmt.Errorf("open secret encryption key %s: %w", k.Name, err)
		}
		if n := len(secret); n != 16 && n != 24 && n != 32 {
			return nil, fmt.Errorf("secret encryption key %s has %d bytes, want 16, 24 or 32", k.Name, n)
		}
		aes.Keys = append(aes.Keys, apiserverv1.Key{Name: k.Name, Secret: base64.StdEncoding.EncodeToString(secret)})
	}
	cfg := apiserverv1.EncryptionConfiguration{
		Resources: []apiserverv1.ResourceConfiguration{{
			Resources: Resources,
			Providers: []apiserverv1.ProviderConfiguration{
				{AESCBC: aes},
				{Identity: &apiserverv1.IdentityConfiguration{}},
			},
		}},
	}
	cfg.APIVersion = apiserverv1.SchemeGroupVersion.String()
	cfg.Kind = "EncryptionConfiguration"
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encode the encryption configuration: %w", err)
	}
	return b, nil
}
