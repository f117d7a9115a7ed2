package pkid

import (
	"context"
	"fmt"
	"net/http"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/certs"
	"github.com/hostplane/hostplane/pkg/httpapi"
	"github.com/hostplane/hostplane/pkg/store"
)

// PathReseal seals every record of the pki bucket again with the current seal key.
const PathReseal = "/v1/pki/reseal"

// reseal reads the seal keys again (a rotated key file, or what the key provider says now)
// and answers Reseal's count.
func (d *Daemon) reseal(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := d.seal.Reload(ctx); err != nil {
		return fmt.Errorf("read the seal keys again: %w", err)
	}
	st, err := Reseal(ctx, d.pki, d.seal, nil)
	if err != nil {
		return api.Errorf(api.CodeUnavailable, "resealed %d of %d records, then: %v; run it again (records are each sealed with one key, and every key of the keyring opens them)",
			st.Resealed, st.Records, err)
	}
	d.Logger().Info("pki records resealed with the current seal key", "records", st.Records, "resealed", st.Resealed, "keys", st.Keys)
	httpapi.WriteJSON(w, http.StatusOK, st)
	return nil
}

// Reseal seals every record of st sealed (in part) with an older key of key again with the
// current one, one record at a time with compare-and-swap: a record is rewritten whole or
// not at all, so after a crash each record is sealed with either key and the keyring opens
// both; running it again finishes the job. after, when set, is called after each record
// written (tests stop there to play a crash).
func Reseal(ctx context.Context, st *store.Store[api.ClusterPKI], key *certs.SealKey, after func(name string)) (api.ResealStatus, error) {
	out := api.ResealStatus{Keys: key.Len()}
	names, err := st.Keys(ctx)
	if err != nil {
		return out, err
	}
	out.Records = len(names)
	for _, name := range names {
		resealed := false
		_, _, err := st.Mutate(ctx, name, false, func(p *api.ClusterPKI) error {
			resealed = false
			changed, err := resealRecord(p, key)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if !changed {
				return store.ErrNoChange
			}
			resealed = true
			return nil
		})
		switch {
		case err == nil && resealed:
			out.Resealed++
			if after != nil {
				after(name)
			}
		case err == nil:
			out.Current++
		case ctx.Err() != nil:
			return out, ctx.Err()
		default:
			return out, err
		}
	}
	return out, nil
}

// resealRecord seals every sealed value of p again with the current key when any of them
// was sealed with an older one; it reports whether it did.
func resealRecord(p *api.ClusterPKI, key *certs.SealKey) (bool, error) {
	older := false
	err := visitSealed(p, func(sealed []byte) ([]byte, error) {
		_, i, err := key.OpenIndex(sealed)
		older = older || i > 0
		return sealed, err
	})
	if err != nil || !older {
		return false, err
	}
	return true, visitSealed(p, func(sealed []byte) ([]byte, error) {
		plain, err := key.Open(sealed)
		if err != nil {
			return nil, err
		}
		return key.Seal(plain), nil
	})
}

// visitSealed replaces every sealed value of p (certificate and service-account keys,
// Secret encryption keys, kubeconfigs) with what fn returns for it.
func visitSealed(p *api.ClusterPKI, fn func([]byte) ([]byte, error)) error {
	for name, b := range p.Certs {
		if len(b.SealedKey) == 0 {
			continue
		}
		v, err := fn(b.SealedKey)
		if err != nil {
			return fmt.Errorf("the key of certificate %s: %w", name, err)
		}
		b.SealedKey = v
		p.Certs[name] = b
	}
	if len(p.ServiceAccount.SealedPriv) > 0 {
		v, err := fn(p.ServiceAccount.SealedPriv)
		if err != nil {
			return fmt.Errorf("the service-account key: %w", err)
		}
		p.ServiceAccount.SealedPriv = v
	}
	if e := p.SecretEncryption; e != nil {
		for i := range e.Keys {
			v, err := fn(e.Keys[i].Sealed)
			if err != nil {
				return fmt.Errorf("the Secret encryption key %s: %w", e.Keys[i].Name, err)
			}
			e.Keys[i].Sealed = v
		}
	}
	for name, kc := range p.Kubeconfigs {
		v, err := fn(kc)
		if err != nil {
			return fmt.Errorf("the kubeconfig %s: %w", name, err)
		}
		p.Kubeconfigs[name] = v
	}
	return nil
}
