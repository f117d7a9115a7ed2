package kube

// WatchTerminationGraceArg makes a stopping kube-apiserver close its open watches after 1 s
// (--shutdown-watch-termination-grace-period). Without it kube-apiserver stops listening,
// then waits for them with no bound, and watches (every informer holds some) do not end on
// their own: a SIGTERMed kube-apiserver with three watches open was still running 10 s later
// and had to be killed, while with the flag it exited 1.1 s after SIGTERM (1.34.4). The
// clients' informers re-establish their watches where the API is served next.
const WatchTerminationGraceArg = "--shutdown-watch-termination-grace-period=1s"
