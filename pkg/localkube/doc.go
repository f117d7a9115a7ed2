// Package localkube runs a local etcd and kube-apiserver as supervised child processes (and,
// with Config.Controllers, kube-controller-manager running just those controllers): the
// management cluster of `hostplane dev` and `hostplane management`, and the real apiserver of
// integration tests.
//
// Everything a cluster needs lives in one directory, so a later Start on the same directory
// (after a daemon restart, with a new process.Supervisor) resumes it: the certificates are
// generated once and kept, the ports are picked once and persisted, and processes still
// running from the same command line are re-adopted instead of restarted.
//
//	<Dir>/ports.json              the ports in use
//	<Dir>/pki/                    ca, apiserver serving cert, admin client cert, sa keys
//	<Dir>/etcd/                   etcd's data
//	<Dir>/logs/<component>.log    process output
//	<Dir>/admin.kubeconfig        an admin (system:masters) kubeconfig
package localkube
