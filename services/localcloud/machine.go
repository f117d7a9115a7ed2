package localcloud

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/atomicfile"
	"github.com/hostplane/hostplane/services/localcloud/ignitionfs"
)

// machine is one simulated worker. Its goroutines (run and, once joined, the kubelet's) live
// under ctx, a child of the cloud's run context; done is closed once they all returned.
type machine struct {
	c             *Cloud
	cluster, name string
	dir           string
	log           *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	wake   chan struct{} // cap 1: new userdata or a fault to look at

	deleting bool // guarded by c.mu: Delete is under way

	mu    sync.Mutex
	rec   record
	creds *credentials // nil until joined
}

// credentials are a joined machine's kubelet client key and certificate (PEM).
type credentials struct {
	keyPEM, certPEM []byte
}

// newMachine returns the machine of rec, with its credentials if it joined before. c.mu is
// held and c.runCtx set.
func (c *Cloud) newMachine(rec *record) *machine {
	ctx, cancel := context.WithCancel(c.runCtx)
	m := &machine{
		c: c, cluster: rec.Spec.Cluster, name: rec.Spec.Name,
		dir:    machineDir(c.cfg.Dir, rec.Spec.Cluster, rec.Spec.Name),
		log:    c.log.With("cluster", rec.Spec.Cluster, "nodepool", rec.Spec.NodePool, "machine", rec.Spec.Name),
		ctx:    ctx,
		cancel: cancel,
		done:   make(chan struct{}),
		wake:   make(chan struct{}, 1),
		rec:    *rec,
	}
	key, kerr := os.ReadFile(filepath.Join(m.dir, kubeletKeyFile))
	crt, cerr := os.ReadFile(filepath.Join(m.dir, kubeletCrtFile))
	if kerr == nil && cerr == nil && len(key) > 0 && len(crt) > 0 {
		m.creds = &credentials{keyPEM: key, certPEM: crt}
	}
	return m
}

func (m *machine) key() string  { return key(m.cluster, m.name) }
func (m *machine) root() string { return filepath.Join(m.dir, rootDir) }

// status returns a copy of the machine's status.
func (m *machine) status() MachineStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rec.Status
}

// save writes the record; m.mu is held (or m not shared yet).
func (m *machine) save() error {
	data, err := json.MarshalIndent(m.rec, "", "  ")
	if err != nil {
		return fmt.Errorf("localcloud: encode machine %s: %w", m.key(), err)
	}
	if err := os.MkdirAll(m.dir, 0o700); err != nil {
		return fmt.Errorf("localcloud: machine dir: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(m.dir, recordFile), data, 0o600); err != nil {
		return fmt.Errorf("localcloud: save machine %s: %w", m.key(), err)
	}
	return nil
}

// update changes the record under the lock and saves it; a machine being deleted (its
// context done and its directory going) is not written again.
func (m *machine) update(fn func(r *record)) MachineStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	fn(&m.rec)
	if m.ctx.Err() == nil {
		if err := m.save(); err != nil {
			m.log.Error("machine record not saved", "error", err)
		}
	}
	return m.rec.Status
}

// setState records state and message, unless the machine is powered off (Stopped), which
// only a new machine undoes.
func (m *machine) setState(state, msg string) {
	m.update(func(r *record) {
		if r.Status.State == StateStopped {
			return
		}
		r.Status.State, r.Status.Message = state, msg
	})
}

// setMessage records what the machine is doing or waiting for.
func (m *machine) setMessage(msg string) {
	m.mu.Lock()
	same := m.rec.Status.Message == msg
	m.mu.Unlock()
	if !same {
		m.update(func(r *record) { r.Status.Message = msg })
	}
}

func (m *machine) fault() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rec.Status.Fault
}

func (m *machine) credentials() *credentials {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.creds
}

// signal wakes the machine's loop (a fault or new userdata to look at).
func (m *machine) signal() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// stop ends the machine's goroutines and waits for them.
func (m *machine) stop() {
	m.cancel()
	<-m.done
}

// inject records fault. Crash powers the machine off at once: when inject returns, it sends
// nothing more. StopHeartbeats takes effect at the next heartbeat; FailNextBoot at the next boot.
func (m *machine) inject(fault string) MachineStatus {
	st := m.update(func(r *record) {
		if r.Status.State == StateStopped && fault != api.FaultCrash {
			return // powered off: nothing else happens to it
		}
		r.Status.Fault = fault
		if fault == api.FaultCrash {
			r.Status.State, r.Status.Message = StateStopped, "crashed (injected fault "+api.FaultCrash+")"
		}
	})
	if fault == api.FaultCrash {
		m.stop()
	}
	m.signal()
	m.log.Info("fault injected", "fault", fault)
	return st
}

// powerOff stops the machine, keeping its disk and kubelet credentials: when it returns,
// it sends nothing more. A machine stopped already (powered off or crashed) stays as it is.
func (m *machine) powerOff() MachineStatus {
	st := m.update(func(r *record) {
		if r.Status.State == StateStopped {
			return
		}
		r.Status.State, r.Status.PoweredOff, r.Status.Message = StateStopped, true, "powered off"
	})
	m.stop()
	if st.PoweredOff {
		m.log.Info("powered off")
	}
	return st
}

// updateUserData gives a machine that has not joined yet new userdata to boot with (Create
// of an existing machine, for example after a token rotation).
func (m *machine) updateUserData(userData []byte) MachineStatus {
	m.mu.Lock()
	joined := m.creds != nil
	same := bytes.Equal(m.rec.Spec.UserData, userData)
	st := m.rec.Status
	m.mu.Unlock()
	if joined || same || len(userData) == 0 {
		return st
	}
	st = m.update(func(r *record) { r.Spec.UserData = userData })
	m.signal()
	return st
}

// reconfigure hands a joined machine a new Ignition stub to apply in place; a machine that has
// not joined yet boots with it instead. Userdata already applied or pending is a no-op.
func (m *machine) reconfigure(userData []byte) MachineStatus {
	if m.credentials() == nil {
		return m.updateUserData(userData)
	}
	sum := digest(userData)
	m.mu.Lock()
	noop := m.rec.AppliedUserData == sum || bytes.Equal(m.rec.PendingUserData, userData)
	st := m.rec.Status
	m.mu.Unlock()
	if noop {
		return st
	}
	st = m.update(func(r *record) {
		r.PendingUserData = userData
		if r.Status.State == StateRunning {
			r.Status.Message = "reconfiguring"
		}
	})
	m.signal()
	m.log.Info("in-place update requested")
	return st
}

// pending returns the userdata of an in-place update not applied yet.
func (m *machine) pending() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rec.PendingUserData
}

// run is the machine's life: boot (fetch Ignition, write files, join) unless it joined
// before, then run its kubelet until the machine stops.
func (m *machine) run() {
	defer close(m.done)
	ctx := m.ctx
	if m.status().State == StateStopped {
		return // powered off
	}
	failures := 0
	for ctx.Err() == nil {
		if m.credentials() == nil {
			err := m.boot(ctx)
			switch {
			case ctx.Err() != nil:
				return
			case errors.Is(err, errBootFault):
				m.log.Warn("boot failed", "error", err)
				return // stays Failed
			case errors.Is(err, errSuperseded):
				continue
			case err != nil:
				failures++
				m.setState(StateFailed, err.Error())
				m.log.Warn("boot failed; retrying", "error", err, "failures", failures)
				m.sleep(ctx, backoff(failures))
				continue
			}
			failures = 0
		}
		if err := m.kubelet(ctx); err != nil && ctx.Err() == nil {
			failures++
			m.setState(StateFailed, err.Error())
			m.log.Warn("kubelet failed; booting again", "error", err)
			m.sleep(ctx, backoff(failures))
		}
	}
}

// sleep waits d, or less if the machine is woken or stopped.
func (m *machine) sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-m.wake:
	case <-t.C:
	}
}

// boot boots the machine once: Ignition, files, then the kubelet's TLS bootstrap.
func (m *machine) boot(ctx context.Context) error {
	var userData []byte
	var fault string
	m.update(func(r *record) {
		r.Status.Boots++
		r.Status.State, r.Status.Message = StateBooting, "fetching the Ignition config"
		userData, fault = r.Spec.UserData, r.Status.Fault
	})
	if fault == api.FaultFailNextBoot {
		m.setState(StateFailed, errBootFault.Error())
		return errBootFault
	}
	m.log.Info("booting")
	root := m.root()
	if err := os.RemoveAll(root); err != nil { // a fresh disk
		return fmt.Errorf("wipe the machine's disk: %w", err)
	}
	cfg, err := m.c.guest.ignition(ctx, userData, fetchHooks{wake: m.wake, retry: func(err error) error {
		m.mu.Lock()
		superseded := !bytes.Equal(m.rec.Spec.UserData, userData)
		m.mu.Unlock()
		if superseded {
			return errSuperseded
		}
		m.setMessage("fetching the Ignition config: " + err.Error())
		return nil
	}})
	if err != nil {
		return err
	}
	if err := ignitionfs.Apply(root, cfg, false); err != nil {
		return err
	}
	nc, err := readNodeConfig(root)
	if err != nil {
		return err
	}
	m.update(func(r *record) {
		r.Status.ConfigHash, r.Status.KubeletVersion = nc.Kubelet.ConfigHash, nc.Kubelet.KubeletVersion
		r.Status.Message = "requesting a kubelet client certificate"
	})
	creds, err := m.join(ctx, nc)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(m.dir, kubeletKeyFile), creds.keyPEM, 0o600); err != nil {
		return fmt.Errorf("save the kubelet key: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(m.dir, kubeletCrtFile), creds.certPEM, 0o600); err != nil {
		return fmt.Errorf("save the kubelet certificate: %w", err)
	}
	m.mu.Lock()
	m.creds = creds
	m.mu.Unlock()
	m.log.Info("joined: kubelet client certificate issued")
	return nil
}

// forget drops the machine's kubelet credentials, so its next boot joins again.
func (m *machine) forget() {
	m.mu.Lock()
	m.creds = nil
	m.mu.Unlock()
	_ = os.Remove(filepath.Join(m.dir, kubeletCrtFile))
	_ = os.Remove(filepath.Join(m.dir, kubeletKeyFile))
}

// backoff is the wait before retry n (1-based): 1s doubling to 30s, with 20% jitter.
func backoff(n int) time.Duration {
	d := time.Second << min(n-1, 5)
	d = min(d, 30*time.Second)
	return d - time.Duration(rand.Int64N(int64(d)/5))
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
