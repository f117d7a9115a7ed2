package store

import "errors"

var (
	// ErrNotFound: the key does not exist (or was deleted).
	ErrNotFound = errors.New("not found")
	// ErrExists: Create found the key already there.
	ErrExists = errors.New("already exists")
	// ErrConflict: the key's revision moved since it was read.
	ErrConflict = errors.New("revision conflict")
	// ErrFull: the bucket has no room for the write (Room); reads, deletes and, until the
	// bucket is nearly full, updates still work.
	ErrFull = errors.New("the store is full")
)
