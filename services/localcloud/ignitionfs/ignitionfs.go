// Package ignitionfs is what Ignition does to a machine's disk in the local cloud: it writes
// the storage section of a config (directories, files, links) under the directory that is the
// machine's root, and reads files back from it, never reaching outside that directory
// whatever the config says. It also decodes and verifies a config's resources, which the
// machine's fetches share.
package ignitionfs

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"

	igntypes "github.com/coreos/ignition/v2/config/v3_5/types"
	"github.com/vincent-petithory/dataurl"
)

// ErrInvalid is the cause of a config whose storage cannot be written as it says.
var ErrInvalid = errors.New("invalid Ignition config")

// ReadFile reads the machine's file p (an absolute path of the machine) under root.
func ReadFile(root, p string) ([]byte, error) {
	name, err := inRoot(p)
	if err != nil {
		return nil, err
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.ReadFile(name)
}

// Verify checks data against a "sha512-<hex>" or "sha256-<hex>" hash, if there is one.
func Verify(data []byte, v igntypes.Verification) error {
	fn, sum, err := v.HashParts()
	if err != nil || fn == "" {
		return err
	}
	var h hash.Hash
	switch fn {
	case "sha512":
		h = sha512.New()
	case "sha256":
		h = sha256.New()
	default:
		return fmt.Errorf("%w: hash function %q is not supported", ErrInvalid, fn)
	}
	h.Write(data)
	if got := hex.EncodeToString(h.Sum(nil)); got != sum {
		return fmt.Errorf("%w: %s is %s, want %s", ErrInvalid, fn, got, sum)
	}
	return nil
}

// DecodeDataURL returns the data of a data: URL.
func DecodeDataURL(src string) ([]byte, error) {
	if !strings.HasPrefix(src, "data:") {
		return nil, fmt.Errorf("source %q is not a data URL", Redact(src))
	}
	d, err := dataurl.DecodeString(src)
	if err != nil {
		return nil, fmt.Errorf("decode data URL: %w", err)
	}
	return d.Data, nil
}

// Decompress undoes a resource's compression (gzip or none), up to MaxFileSize bytes.
func Decompress(data []byte, compression *string) ([]byte, error) {
	if compression == nil || *compression == "" {
		return data, nil
	}
	if *compression != "gzip" {
		return nil, fmt.Errorf("compression %q is not supported", *compression)
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("gunzip: %w", err)
	}
	out, err := io.ReadAll(io.LimitReader(zr, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("gunzip: %w", err)
	}
	if len(out) > MaxFileSize {
		return nil, fmt.Errorf("gunzip: more than %d bytes", MaxFileSize)
	}
	return out, nil
}

// Redact shortens a source for messages: data URLs are elided, URLs lose their query.
func Redact(src string) string {
	if strings.HasPrefix(src, "data:") {
		return "data:…"
	}
	if u, err := url.Parse(src); err == nil {
		u.RawQuery, u.User = "", nil
		return u.String()
	}
	return src
}

// Apply writes the config's storage (directories, files, links) under root, the
// machine's filesystem. A file that exists and is not marked overwrite fails the boot, as in
// Ignition; force (an in-place update) overwrites every file.
//
// Nothing a config says reaches the host outside root: every path is opened through an
// os.Root, which refuses to follow a link out of it, and a link's target is resolved in the
// machine's filesystem (".." stops at its "/", as it does on a machine) and written relative
// to the link, so it names a place under root whoever follows it.
func Apply(root string, cfg igntypes.Config, force bool) error {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return err
	}
	defer r.Close()
	for _, d := range cfg.Storage.Directories {
		p, err := inRoot(d.Path)
		if err != nil {
			return err
		}
		if err := r.MkdirAll(p, modeOf(d.Mode, 0o755)); err != nil {
			return fmt.Errorf("directory %s: %w", d.Path, err)
		}
	}
	for _, f := range cfg.Storage.Files {
		if err := writeIgnitionFile(r, f, force); err != nil {
			return err
		}
	}
	for _, l := range cfg.Storage.Links {
		if err := writeIgnitionLink(r, l, force); err != nil {
			return err
		}
	}
	return nil
}

func writeIgnitionLink(r *os.Root, l igntypes.Link, force bool) error {
	p, err := inRoot(l.Path)
	if err != nil {
		return err
	}
	if l.Target == nil || (l.Hard != nil && *l.Hard) {
		return nil // hard links have nothing to say on a machine without an OS
	}
	target := *l.Target
	if !path.IsAbs(target) {
		target = path.Join("/", path.Dir(p), target)
	}
	rel, err := filepath.Rel(filepath.Join("/", filepath.Dir(p)), filepath.Clean(target))
	if err != nil {
		return fmt.Errorf("%w: link %s: target %q: %v", ErrInvalid, l.Path, *l.Target, err)
	}
	if err := r.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("link %s: %w", l.Path, err)
	}
	if force || (l.Overwrite != nil && *l.Overwrite) {
		_ = r.Remove(p)
	}
	if err := r.Symlink(rel, p); err != nil {
		return fmt.Errorf("link %s: %w", l.Path, err)
	}
	return nil
}

// MaxFileSize bounds a file's contents once decoded and decompressed.
const MaxFileSize = 64 << 20

func writeIgnitionFile(r *os.Root, f igntypes.File, force bool) error {
	p, err := inRoot(f.Path)
	if err != nil {
		return err
	}
	var data []byte
	if f.Contents.Source != nil {
		raw, err := DecodeDataURL(*f.Contents.Source)
		if err != nil {
			return fmt.Errorf("file %s: contents: %w", f.Path, err)
		}
		if data, err = Decompress(raw, f.Contents.Compression); err != nil {
			return fmt.Errorf("file %s: contents: %w", f.Path, err)
		}
		if err := Verify(raw, f.Contents.Verification); err != nil {
			return fmt.Errorf("file %s: %w", f.Path, err)
		}
	}
	existing, rerr := r.ReadFile(p)
	exists := rerr == nil
	overwrite := force || (f.Overwrite != nil && *f.Overwrite)
	switch {
	case exists && !overwrite && f.Contents.Source != nil:
		return fmt.Errorf("file %s exists and overwrite is false", f.Path)
	case exists && f.Contents.Source == nil:
		data = existing // only appends and the mode change it
	}
	for i, a := range f.Append {
		if a.Source == nil {
			continue
		}
		raw, err := DecodeDataURL(*a.Source)
		if err != nil {
			return fmt.Errorf("file %s: append.%d: %w", f.Path, i, err)
		}
		more, err := Decompress(raw, a.Compression)
		if err != nil {
			return fmt.Errorf("file %s: append.%d: %w", f.Path, i, err)
		}
		data = append(data, more...)
	}
	if len(data) > MaxFileSize {
		return fmt.Errorf("%w: file %s: %d bytes, more than the %d a file may hold", ErrInvalid, f.Path, len(data), MaxFileSize)
	}
	if err := r.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("file %s: %w", f.Path, err)
	}
	if err := writeInRoot(r, p, data, modeOf(f.Mode, 0o644)); err != nil {
		return fmt.Errorf("file %s: %w", f.Path, err)
	}
	return nil
}

// writeInRoot replaces p under r with data at once (a temporary file renamed over it): a
// crash leaves the old file or the new one, and a link at p is replaced, never followed.
func writeInRoot(r *os.Root, p string, data []byte, mode fs.FileMode) error {
	tmp := p + ".hostplane-tmp"
	_ = r.Remove(tmp)
	f, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if serr := f.Sync(); err == nil {
		err = serr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = r.Chmod(tmp, mode) // whatever the umask
	}
	if err == nil {
		err = r.Rename(tmp, p)
	}
	if err != nil {
		_ = r.Remove(tmp)
	}
	return err
}

// inRoot maps an absolute path of the machine to its name under the machine's root
// ("." for "/"); ".." stops at "/", as it does on a machine.
func inRoot(p string) (string, error) {
	if !path.IsAbs(p) {
		return "", fmt.Errorf("%w: path %q is not absolute", ErrInvalid, p)
	}
	rel := strings.TrimPrefix(path.Clean(p), "/")
	if rel == "" {
		rel = "."
	}
	return filepath.FromSlash(rel), nil
}

func modeOf(m *int, def fs.FileMode) fs.FileMode {
	if m == nil {
		return def
	}
	return fs.FileMode(*m) & fs.ModePerm
}
