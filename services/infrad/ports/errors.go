package ports

import "github.com/hostplane/hostplane/pkg/portrange"

// ErrNoFreePort: the allocator could not find a port no cluster records.
var ErrNoFreePort = portrange.ErrNoFreePort
