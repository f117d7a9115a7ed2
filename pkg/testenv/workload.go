package testenv

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PauseDeployment is a Deployment of n pause pods (label app=<name>) that each request cpu
// and, with selector, land only on nodes with those labels: the load of the autoscaling tests
// and benchmarks. The simulated kubelet runs whatever the scheduler binds, so only the
// requests matter.
func PauseDeployment(name string, n int32, cpu string, selector map[string]string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &n,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: selector,
					Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}},
				},
			},
		},
	}
}
