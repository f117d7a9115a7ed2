package store

import (
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
)

// Retry is client-go's retry.OnError that keeps a context error: retry.OnError treats
// context.Canceled and DeadlineExceeded like running out of steps and returns the last
// retriable error instead, which is nil when fn's first call was cancelled — so a write cut
// short by a shutdown looked like a success (and MutateBefore returned a nil value with no
// error). Retry returns what fn's last call returned.
func Retry(backoff wait.Backoff, retriable func(error) bool, fn func() error) error {
	var last error
	_ = retry.OnError(backoff, retriable, func() error {
		last = fn()
		return last
	})
	return last
}

// RetryOnConflict is Retry with client-go's default backoff and isConflict (a Kubernetes
// API conflict, for example) as what is worth another try.
func RetryOnConflict(isConflict func(error) bool, fn func() error) error {
	return Retry(retry.DefaultRetry, isConflict, fn)
}
