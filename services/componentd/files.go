package componentd

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/hostplane/hostplane/services/componentd/internal/component"
)

// writeFiles writes files (paths relative to dir) with mode 0600, each only when its content
// differs from what is on disk, so a file a running process reads is not touched needlessly.
// It returns the paths it wrote.
func writeFiles(dir string, files map[string][]byte) ([]string, error) {
	for _, sub := range []string{"", component.PKIDir, component.KubeconfigDir, component.LogDir} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return nil, fmt.Errorf("cluster dir: %w", err)
		}
	}
	var written []string
	for _, rel := range slices.Sorted(maps.Keys(files)) {
		path := filepath.Join(dir, filepath.FromSlash(rel))
		old, err := os.ReadFile(path)
		if err == nil && bytes.Equal(old, files[rel]) {
			continue
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return written, fmt.Errorf("read %s: %w", rel, err)
		}
		if err := writeFileAtomic(path, files[rel]); err != nil {
			return written, err
		}
		written = append(written, rel)
	}
	return written, nil
}

// writeFileAtomic replaces path with content (mode 0600) so a reader never sees half a file.
func writeFileAtomic(path string, content []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, err = tmp.Write(content)
	if err == nil {
		err = tmp.Chmod(0o600)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
