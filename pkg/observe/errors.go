package observe

import "errors"

// ErrNoServiceName is returned by NewTracerProvider when TracingConfig.ServiceName is empty.
var ErrNoServiceName = errors.New("observe: tracing needs a service name")
