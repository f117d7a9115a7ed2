package componentd

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/hostplane/hostplane/pkg/api"
	"github.com/hostplane/hostplane/pkg/reconcile"
	"github.com/hostplane/hostplane/pkg/store"
	"github.com/hostplane/hostplane/services/componentd/internal/component"
	"github.com/hostplane/hostplane/services/componentd/internal/rollout"
	"github.com/hostplane/hostplane/services/componentd/procruntime"
)

// processRuntime runs the components as child processes (RuntimeProcess, package
// procruntime). It adds what belongs to componentd around procruntime's Converge: the
// cluster's inputs and files, etcd restores before and backups after.
type processRuntime struct{ d *Daemon }

var (
	_ workloads            = processRuntime{}
	_ hibernator           = processRuntime{}
	_ procruntime.Recorder = recorder{}
)

func (p processRuntime) converge(ctx context.Context, log *slog.Logger, cl *clusterState) (reconcile.Result, error) {
	d := p.d
	if err := d.proc.Running(); err != nil {
		return reconcile.Result{}, err
	}
	name := cl.cluster.Name
	// A cluster restored from a backup also decrypts with the Secret encryption keys the
	// backup's Secrets were written with.
	pki, err := d.withRestoredKeys(ctx, cl.pki, cl.cluster.Spec.RestoreFrom)
	if err != nil {
		return reconcile.Result{}, err
	}
	files, err := component.Files(pki, d.seal)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("cluster %s: %w", name, err)
	}
	in := &component.Inputs{
		Cluster:    name,
		Version:    cl.cluster.Spec.Release.Version,
		Policy:     cl.policy(),
		Infra:      *cl.infra,
		Networking: cl.cluster.Spec.Networking,
		Dir:        d.proc.ClusterDir(name),
		Files:      files,
		Audit:      cl.cluster.Spec.EffectiveAudit(),
		PKISerial:  cl.pki.Serial,
		Tuning:     d.cfg.tuning,
	}
	if in.Autoscaler, err = d.autoscaler(ctx, cl.cluster); err != nil {
		return reconcile.Result{}, fmt.Errorf("cluster %s: %w", name, err)
	}
	if files[component.FileAuditPolicy], err = component.AuditPolicyFile(in.Audit); err != nil {
		return reconcile.Result{}, fmt.Errorf("cluster %s: %w", name, err)
	}
	if in.AdminCert, in.AdminKey, err = component.AdminCredentials(cl.pki, d.seal); err != nil {
		log.Warn("kube-apiserver probe runs anonymously", "err", err)
	}
	written, err := procruntime.WriteFiles(in.Dir, files)
	if len(written) > 0 {
		log.Info("wrote control-plane files", "files", written, "pki_serial", cl.pki.Serial)
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	etcd, err := newEtcdAccess(in)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("cluster %s: %w", name, err)
	}
	if err := d.restoreInPlace(ctx, log, cl, in, etcd); err != nil {
		return reconcile.Result{}, fmt.Errorf("cluster %s: in-place restore: %w", name, err)
	}
	if err := d.restoreNew(ctx, log, cl, in, etcd); err != nil {
		return reconcile.Result{}, fmt.Errorf("cluster %s: restore from backup: %w", name, err)
	}
	progress, err := d.proc.Converge(ctx, log, in, recorder{d})
	if err != nil {
		return reconcile.Result{}, err
	}
	res := d.requeue(progress.Settled)
	if progress.WaitingForRelease {
		res = reconcile.Result{RequeueAfter: releaseBuildPoll}
	}
	rec, _, err := getOptional(ctx, d.components, api.ComponentKey(name, api.ComponentEtcd))
	if err != nil {
		return res, err
	}
	etcd.available = rec != nil && rec.Status.Conditions.IsTrue(api.ConditionAvailable)
	return d.backupStep(ctx, log, cl, etcd, res)
}

func (p processRuntime) remove(ctx context.Context, log *slog.Logger, cluster string) (bool, error) {
	err := p.d.proc.Remove(ctx, log, cluster)
	return err == nil, err
}

// hibernate stops every process of the cluster's control plane, dependents first, and
// records each component hibernated. The cluster's directory and the ports infrad allocated
// stay: waking is an ordinary converge that starts the same processes on the same data. A
// componentd restart while the cluster hibernates finds nothing to stop and records nothing
// new.
func (p processRuntime) hibernate(ctx context.Context, log *slog.Logger, c *api.Cluster) (reconcile.Result, error) {
	d := p.d
	if err := d.proc.Hibernate(ctx, log, c.Name); err != nil {
		return reconcile.Result{}, err
	}
	if err := d.recordHibernated(ctx, log, c); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: d.cfg.SteadyInterval}, nil
}

// recorder records the process runtime's components through the daemon's one code path.
type recorder struct{ d *Daemon }

func (r recorder) Records(ctx context.Context, cluster string) (map[string]*store.Entry[api.ControlPlaneComponent], error) {
	return r.d.records(ctx, cluster)
}

func (r recorder) Record(ctx context.Context, log *slog.Logger, cluster string, old *store.Entry[api.ControlPlaneComponent], o component.Observation) error {
	return r.d.record(ctx, log, cluster, old, o)
}

func (r recorder) ReleaseNotBuilt(ctx context.Context, log *slog.Logger, cluster string, comp *component.Component,
	in *component.Inputs, old *store.Entry[api.ControlPlaneComponent]) (rollout.Summary, error) {
	return r.d.recordReleaseNotBuilt(ctx, log, cluster, comp, in, old)
}

func (r recorder) CannotRun(ctx context.Context, log *slog.Logger, cluster string, comp *component.Component,
	in *component.Inputs, old *store.Entry[api.ControlPlaneComponent], msg string) (rollout.Summary, error) {
	return r.d.recordCannotRun(ctx, log, cluster, comp, in, old, ReasonCannotRun, msg)
}
