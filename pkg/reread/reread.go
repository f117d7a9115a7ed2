// Package reread keeps a value parsed from a file current: every Get looks at the file
// (one stat) and parses it again when it changed, so a credential rotated or revoked on disk
// (a Kubernetes Secret volume, a file an operator edits) takes effect at the next request,
// without a restart. While the file cannot be read or does not parse (a rotation half done,
// a typo), Get keeps answering the last good value, with the error. A change is a new file
// (an atomic rename, as Secret volumes and editors do), a new size or a new modification
// time; an in-place rewrite of the same size within the file system's clock tick (a few
// milliseconds) is not seen until the next change.
package reread

import (
	"fmt"
	"os"
	"sync"
)

// File is a file and its parsed value. It is safe for concurrent use.
type File[T any] struct {
	path  string
	parse func([]byte) (T, error)

	mu    sync.Mutex
	stamp os.FileInfo
	val   T
	err   error // of the last read after stamp's, nil while the file is as parsed
}

// New reads and parses path now: the file must be valid at start. Errors name path.
func New[T any](path string, parse func([]byte) (T, error)) (*File[T], error) {
	f := &File[T]{path: path, parse: parse}
	st, err := os.Stat(path)
	if err == nil {
		err = f.load(st)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// Path is the file's path.
func (f *File[T]) Path() string { return f.path }

// Get returns the value as the file is now. When the file changed and cannot be read or
// parsed, it returns the last good value and the error (naming the file), until the file
// changes again.
func (f *File[T]) Get() (T, error) {
	st, serr := os.Stat(f.path)
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case serr != nil:
		f.err, f.stamp = serr, nil
	case !Unchanged(st, f.stamp):
		if err := f.load(st); err != nil {
			f.err = fmt.Errorf("%s: %w (the last good content is kept)", f.path, err)
			f.stamp = st
		}
	}
	return f.val, f.err
}

// load parses the file described by st; on success it becomes the value.
func (f *File[T]) load(st os.FileInfo) error {
	b, err := os.ReadFile(f.path)
	if err != nil {
		return err
	}
	v, err := f.parse(b)
	if err != nil {
		return err
	}
	f.val, f.stamp, f.err = v, st, nil
	return nil
}

// Unchanged reports whether a and b (two stats of one path) describe the same, unchanged
// file. A Secret volume replaces its files by renaming a directory, which gives a new inode.
func Unchanged(a, b os.FileInfo) bool {
	return a != nil && b != nil && os.SameFile(a, b) && a.ModTime().Equal(b.ModTime()) && a.Size() == b.Size()
}
