// Package rollout decides, one reconcile at a time, how a component's replicas move to a
// desired config hash: replicas that run nothing start together (so a new etcd cluster can
// form its quorum), replicas that run another hash are replaced one at a time, and only once
// every other replica is ready and the component's dependencies have finished their own
// rollout.
package rollout

// Replica is what runs under one replica's name now.
type Replica struct {
	// Running: a process runs, or is being restarted, under the replica's name.
	Running bool
	// Hash is the config hash it was started from (meaningful when Running).
	Hash string
	// Ready: its probe passed and it still runs.
	Ready bool
}

// Gate is what the component's dependencies allow.
type Gate struct {
	// Available: every dependency is Available, so replicas that run nothing may start.
	Available bool
	// Settled: every dependency is Available and RolloutComplete, so running replicas may
	// be replaced.
	Settled bool
}

// Step is what to do now.
type Step struct {
	Start   []int // replicas that run nothing: start them with the desired spec
	Replace int   // the replica to stop and start again with the desired spec, or -1
}

// Next returns the next step toward desired. Calling it again after the step took effect
// (and the replicas' state was observed again) continues the rollout; a converged
// component gets an empty step.
func Next(desired string, replicas []Replica, g Gate) Step {
	s := Step{Replace: -1}
	if !g.Available {
		return s
	}
	for i, r := range replicas {
		if !r.Running {
			s.Start = append(s.Start, i)
		}
	}
	if len(s.Start) > 0 || !g.Settled {
		return s
	}
	candidate := -1
	for i, r := range replicas {
		switch {
		case r.Hash == desired && !r.Ready:
			return s // the last replacement (or a crash) is not ready yet: wait
		case r.Hash != desired && !r.Ready && (candidate < 0 || replicas[candidate].Ready):
			candidate = i // an old replica that is down anyway goes first
		case r.Hash != desired && candidate < 0:
			candidate = i
		}
	}
	if candidate >= 0 && replicas[candidate].Ready {
		// Replacing a ready replica takes one down: only when every replica is ready.
		for _, r := range replicas {
			if !r.Ready {
				return s
			}
		}
	}
	s.Replace = candidate
	return s
}

// Summary is a component's state derived from its replicas.
type Summary struct {
	Ready     int  // replicas ready, whatever their hash
	Updated   int  // replicas ready at the desired hash
	Available bool // at least quorum replicas are ready
	Complete  bool // every replica is ready at the desired hash
}

// Summarise derives the component's state; quorum is how many ready replicas make it
// Available.
func Summarise(desired string, replicas []Replica, quorum int) Summary {
	var s Summary
	for _, r := range replicas {
		if r.Running && r.Ready {
			s.Ready++
			if r.Hash == desired {
				s.Updated++
			}
		}
	}
	s.Available = len(replicas) > 0 && s.Ready >= quorum
	s.Complete = len(replicas) > 0 && s.Updated == len(replicas)
	return s
}
