package pkid

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/store"
)

// keyRotationPoll is how soon a Secret encryption key rotation in progress is looked at again.
const keyRotationPoll = 2 * time.Second

// stepKeyRotation moves the Secret encryption key rotation of p (if any) on by at most one
// phase, the way Kubernetes documents it:
//
//	Requested → KeyAdded:  a new key is listed second (every kube-apiserver can decrypt with it);
//	KeyAdded  → KeyActive: it is moved first (new writes use it);
//	KeyActive → Rewritten: every Secret is rewritten through the guest API (encrypted with it);
//	Rewritten → done:      the old keys are dropped.
//
// Every phase after Requested first waits until kube-apiserver runs the configuration of p's
// Serial (componentd records it in ControlPlaneComponentStatus.PKISerial once the rollout is
// complete), so no replica ever meets a value it cannot decrypt. A change of keys gets a new
// Serial, so componentd rolls kube-apiserver. It reports whether p changed.
func (d *Daemon) stepKeyRotation(ctx context.Context, log *slog.Logger, name string, p *api.ClusterPKI, b *bundler) (bool, error) {
	e := p.SecretEncryption
	if e == nil || e.Rotation == nil {
		return false, nil
	}
	r := e.Rotation
	if r.Phase != api.RotationRequested {
		ok, why, err := d.apiServerRuns(ctx, name, p.Serial)
		if err != nil {
			return false, err
		}
		if !ok {
			if r.Message == why {
				return false, nil
			}
			r.Message = why
			return true, nil
		}
	}
	switch r.Phase {
	case api.RotationRequested:
		k, err := b.newEncryptionKey()
		if err != nil {
			return false, err
		}
		e.Keys = append(e.Keys, k)
		r.Key, r.Phase = k.Name, api.RotationKeyAdded
		r.Message = fmt.Sprintf("waiting for kube-apiserver to run with key %s listed second", k.Name)
	case api.RotationKeyAdded:
		i := slices.IndexFunc(e.Keys, func(k api.EncryptionKey) bool { return k.Name == r.Key })
		if i < 0 {
			e.Rotation = nil // the new key is gone: nothing left to rotate to
			log.Warn("secret encryption key rotation abandoned: its new key is missing", "key", r.Key)
			break
		}
		k := e.Keys[i]
		e.Keys = append([]api.EncryptionKey{k}, slices.Delete(e.Keys, i, i+1)...)
		r.Phase = api.RotationKeyActive
		r.Message = fmt.Sprintf("waiting for kube-apiserver to encrypt with key %s", k.Name)
	case api.RotationKeyActive:
		n, err := d.rewriteSecrets(ctx, name)
		if err != nil {
			msg := fmt.Sprintf("rewriting Secrets with key %s: %v", r.Key, err)
			changed := r.Message != msg
			r.Message = msg
			return changed, err
		}
		r.Rewritten, r.Phase = n, api.RotationRewritten
		r.Message = fmt.Sprintf("%d Secrets rewritten with key %s; dropping the old keys", n, r.Key)
		log.Info("secrets rewritten with the new encryption key", "key", r.Key, "secrets", n)
		return true, nil // the keys did not change: no new serial
	case api.RotationRewritten:
		e.Keys = slices.DeleteFunc(e.Keys, func(k api.EncryptionKey) bool { return k.Name != r.Key })
		e.Rotation = nil
		log.Info("secret encryption key rotated", "key", r.Key, "rewritten", r.Rewritten)
	default:
		return false, fmt.Errorf("secret encryption key rotation in unknown phase %q", r.Phase)
	}
	serial, err := newSerial()
	if err != nil {
		return false, err
	}
	p.Serial = serial
	return true, nil
}

// apiServerRuns reports whether every kube-apiserver replica of cluster name runs the
// configuration of PKI serial, and if not, what it waits for.
func (d *Daemon) apiServerRuns(ctx context.Context, name, serial string) (bool, string, error) {
	c, _, err := d.controlplane.Get(ctx, api.ComponentKey(name, api.ComponentKubeAPIServer))
	if errors.Is(err, store.ErrNotFound) {
		return false, "waiting for kube-apiserver to run", nil
	}
	if err != nil {
		return false, "", err
	}
	st := c.Status
	if st.PKISerial != serial || !st.Conditions.IsTrue(api.ConditionAvailable) || !st.Conditions.IsTrue(api.ConditionRolloutComplete) {
		return false, fmt.Sprintf("waiting for kube-apiserver to roll out the PKI serial %s", serial), nil
	}
	return true, "", nil
}

// rewriteSecrets rewrites every Secret of the guest cluster unchanged through its API: a
// value kube-apiserver decrypted with a key that is not the first is written again, so with
// the first key. It returns how many Secrets it rewrote.
func (d *Daemon) rewriteSecrets(ctx context.Context, name string) (int, error) {
	g, err := d.guests.For(ctx, name)
	if err != nil {
		return 0, err
	}
	secrets := g.Clientset.CoreV1().Secrets(metav1.NamespaceAll)
	n := 0
	opts := metav1.ListOptions{Limit: 250}
	for {
		list, err := secrets.List(ctx, opts)
		if err != nil {
			return n, fmt.Errorf("list Secrets: %w", err)
		}
		for i := range list.Items {
			s := &list.Items[i]
			_, err := g.Clientset.CoreV1().Secrets(s.Namespace).Update(ctx, s, metav1.UpdateOptions{})
			switch {
			case apierrors.IsNotFound(err), apierrors.IsConflict(err):
				// Deleted, or written since it was listed: written with the first key either way.
			case err != nil:
				return n, fmt.Errorf("rewrite Secret %s/%s: %w", s.Namespace, s.Name, err)
			default:
				n++
			}
		}
		if list.Continue == "" {
			return n, nil
		}
		opts.Continue = list.Continue
	}
}
