package localcloud

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// pods reports the pods bound to the node Running and finishes those being deleted (grace
// period 0, as the kubelet does once their containers stopped), until ctx ends. It watches
// only its own pods (spec.nodeName=<node>), which is all the Node authorizer lets it see.
func (k *kubelet) pods(ctx context.Context) {
	lw := cache.NewListWatchFromClient(k.cs.CoreV1().RESTClient(), "pods", metav1.NamespaceAll,
		fields.OneTermEqualSelector("spec.nodeName", k.m.name))
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](200*time.Millisecond, 30*time.Second),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: ""},
	)
	enqueue := func(obj any) {
		if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
			queue.Add(key)
		}
	}
	store, ctrl := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    &corev1.Pod{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    enqueue,
			UpdateFunc: func(_, obj any) { enqueue(obj) },
		},
	})
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		<-ctx.Done()
		queue.ShutDown()
	})
	wg.Go(func() { ctrl.RunWithContext(ctx) })
	for {
		key, shutdown := queue.Get()
		if shutdown {
			return
		}
		obj, exists, err := store.GetByKey(key)
		if err == nil && exists {
			err = k.syncPod(ctx, obj.(*corev1.Pod))
		}
		if err != nil && ctx.Err() == nil {
			k.m.log.Debug("pod not synced; retrying", "pod", key, "error", err)
			queue.AddRateLimited(key)
		} else {
			queue.Forget(key)
		}
		queue.Done(key)
	}
}

// syncPod brings one pod where the kubelet would: deleted if it is being deleted, Running
// with every container started and ready otherwise.
func (k *kubelet) syncPod(ctx context.Context, pod *corev1.Pod) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	pods := k.cs.CoreV1().Pods(pod.Namespace)
	if pod.DeletionTimestamp != nil {
		err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{
			GracePeriodSeconds: new(int64(0)),
			Preconditions:      &metav1.Preconditions{UID: &pod.UID},
		})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil // gone, or another pod of that name now
		}
		return err
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed || reportedRunning(pod) {
		return nil
	}
	p := pod.DeepCopy()
	p.Status = runningStatus(pod, k.ip)
	_, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// reportedRunning reports whether the pod's status already says what runningStatus would.
func reportedRunning(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" ||
		len(pod.Status.ContainerStatuses) != len(pod.Spec.Containers) {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// runningStatus is the status of pod with every container running and ready on a node at hostIP.
func runningStatus(pod *corev1.Pod, hostIP string) corev1.PodStatus {
	now := metav1.Now()
	start := now
	if pod.Status.StartTime != nil {
		start = *pod.Status.StartTime
	}
	ip := podIP(string(pod.UID))
	if pod.Spec.HostNetwork {
		ip = hostIP
	}
	cond := func(t corev1.PodConditionType) corev1.PodCondition {
		for _, c := range pod.Status.Conditions {
			if c.Type == t && c.Status == corev1.ConditionTrue {
				return c
			}
		}
		return corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now}
	}
	container := func(c corev1.Container, state corev1.ContainerState, ready bool) corev1.ContainerStatus {
		id := digest([]byte(string(pod.UID) + "/" + c.Name))
		return corev1.ContainerStatus{
			Name:        c.Name,
			Image:       c.Image,
			ImageID:     c.Image + "@sha256:" + digest([]byte(c.Image)),
			ContainerID: "containerd://" + id,
			Ready:       ready,
			Started:     new(ready),
			State:       state,
		}
	}
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: start}}
	st := corev1.PodStatus{
		Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{
			cond(corev1.PodReadyToStartContainers), cond(corev1.PodInitialized), cond(corev1.ContainersReady),
			cond(corev1.PodReady), cond(corev1.PodScheduled),
		},
		HostIP:    hostIP,
		HostIPs:   []corev1.HostIP{{IP: hostIP}},
		PodIP:     ip,
		PodIPs:    []corev1.PodIP{{IP: ip}},
		StartTime: &start,
		QOSClass:  pod.Status.QOSClass,
	}
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			st.InitContainerStatuses = append(st.InitContainerStatuses, container(c, running, true)) // a sidecar
			continue
		}
		done := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 0, Reason: "Completed", StartedAt: start, FinishedAt: start,
		}}
		s := container(c, done, true)
		s.Started = new(false)
		st.InitContainerStatuses = append(st.InitContainerStatuses, s)
	}
	for _, c := range pod.Spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, container(c, running, true))
	}
	return st
}
