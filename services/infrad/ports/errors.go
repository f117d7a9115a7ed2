package ports

import "errors"

// ErrNoFreePort: the allocator could not find a port no cluster records.
var ErrNoFreePort = errors.New("no free port")
