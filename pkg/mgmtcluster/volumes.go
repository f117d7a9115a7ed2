package mgmtcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// Entries of Dir that Config.KeepData keeps.
const (
	apiserverDir = "apiserver" // localkube: etcd's data and the certificates
	volumesDir   = "volumes"   // one directory per PersistentVolume
)

// AddHostPathVolumes creates n PersistentVolumes of size each (for example "1Gi"), without a
// storage class, backed by directories under Dir: claims without a class (a StatefulSet's
// volumeClaimTemplates, with no default StorageClass) bind to them. They are named
// <Name>-pv-<i>, numbered on from the highest one that exists.
func (c *Cluster) AddHostPathVolumes(ctx context.Context, n int, size string) error {
	cs, err := c.Clientset()
	if err != nil {
		return err
	}
	pvs, err := c.volumes(ctx, cs)
	if err != nil {
		return err
	}
	return c.addVolumes(ctx, cs, pvs, n, size)
}

// addVolumes creates n volumes of size, numbered on from the highest of existing.
func (c *Cluster) addVolumes(ctx context.Context, cs kubernetes.Interface, existing []corev1.PersistentVolume, n int, size string) error {
	q, err := resource.ParseQuantity(size)
	if err != nil {
		return err
	}
	next := 1
	for _, pv := range existing {
		if i, err := strconv.Atoi(strings.TrimPrefix(pv.Name, c.volumePrefix())); err == nil && i >= next {
			next = i + 1
		}
	}
	for i := next; i < next+n; i++ {
		name := c.volumePrefix() + strconv.Itoa(i)
		dir := filepath.Join(c.cfg.Dir, volumesDir, name)
		// hostPath volumes get no fsGroup ownership: pods running as any user may write.
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := os.Chmod(dir, 0o777); err != nil {
			return err
		}
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: q},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
					Path: dir, Type: ptr.To(corev1.HostPathDirectory),
				}},
			},
		}
		if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) volumePrefix() string { return c.cfg.Name + "-pv-" }

// volumes lists the PersistentVolumes AddHostPathVolumes made.
func (c *Cluster) volumes(ctx context.Context, cs kubernetes.Interface) ([]corev1.PersistentVolume, error) {
	list, err := cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []corev1.PersistentVolume
	for _, pv := range list.Items {
		if strings.HasPrefix(pv.Name, c.volumePrefix()) {
			out = append(out, pv)
		}
	}
	return out, nil
}

// ProvisionVolumes keeps spare unbound volumes of size ready for new claims, as a
// provisioner would, until ctx ends: every interval it adds what is missing, and it deletes
// the volumes whose claim is gone (Released: the StatefulSet's namespace was deleted) with
// their directories, so a deleted cluster leaves no data behind. Errors are logged and tried
// again.
func (c *Cluster) ProvisionVolumes(ctx context.Context, spare int, size string, interval time.Duration) {
	cs, err := c.Clientset()
	if err != nil {
		c.log.Error("no volumes will be provisioned", "err", err)
		return
	}
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := c.provisionVolumes(ctx, cs, spare, size); err != nil && ctx.Err() == nil {
			c.log.Warn("keeping spare volumes", "err", err)
		}
	}, interval)
}

// provisionVolumes is one round of ProvisionVolumes, from one list of the volumes.
func (c *Cluster) provisionVolumes(ctx context.Context, cs kubernetes.Interface, spare int, size string) error {
	pvs, err := c.volumes(ctx, cs)
	if err != nil {
		return err
	}
	available := 0
	var errs []error
	for _, pv := range pvs {
		switch pv.Status.Phase {
		case corev1.VolumeAvailable:
			available++
		case corev1.VolumeReleased:
			if err := cs.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
				continue
			}
			errs = append(errs, os.RemoveAll(filepath.Join(c.cfg.Dir, volumesDir, pv.Name)))
			c.log.Info("deleted a released volume and its data", "volume", pv.Name, "claim", claimName(pv))
		}
	}
	if available < spare {
		// Numbered on from every volume listed, the ones just deleted too: a name is not reused.
		errs = append(errs, c.addVolumes(ctx, cs, pvs, spare-available, size))
	}
	return errors.Join(errs...)
}

func claimName(pv corev1.PersistentVolume) string {
	if ref := pv.Spec.ClaimRef; ref != nil {
		return fmt.Sprintf("%s/%s", ref.Namespace, ref.Name)
	}
	return ""
}
