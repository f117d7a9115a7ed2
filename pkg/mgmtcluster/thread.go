package mgmtcluster

import "runtime"

// lockThreadForever wires the calling goroutine to its OS thread without a matching unlock:
// when the goroutine returns, the Go runtime ends the thread instead of reusing it, so a
// thread that joined another namespace never runs other goroutines.
func lockThreadForever() { runtime.LockOSThread() }
