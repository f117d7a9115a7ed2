package ignition

import "errors"

// Errors.
var (
	// ErrEmptyDocument: a config document has no content.
	ErrEmptyDocument = errors.New("the document is empty")
	// ErrNotIgnition: a config document is neither an Ignition config nor a MachineConfig.
	ErrNotIgnition = errors.New("not an Ignition v3 config or a MachineConfig")
	// ErrInvalidIgnition: an Ignition config failed Ignition's parser or validation.
	ErrInvalidIgnition = errors.New("invalid Ignition config")
	// ErrReservedPath: a config document writes a file hostplane writes itself.
	ErrReservedPath = errors.New("reserved path")
	// ErrSourceScheme: a config document's source uses a URL scheme outside SourceSchemes.
	ErrSourceScheme = errors.New("source scheme not allowed")
	// ErrInvalidPayload: a rendered config failed validation; it must not be served.
	ErrInvalidPayload = errors.New("rendered Ignition config is invalid")
	// ErrNotAcceptable: the machine reads no spec version that expresses the config.
	ErrNotAcceptable = errors.New("no spec version the machine reads expresses the config")
	// ErrNotStub: userdata is not a stub rendered by Stub.
	ErrNotStub = errors.New("not an Ignition stub")
	// ErrNoFile: the config has no file at that path.
	ErrNoFile = errors.New("no such file in the config")
	// ErrNotDataURL: a source is not a data: URL.
	ErrNotDataURL = errors.New("not a data URL")
)
