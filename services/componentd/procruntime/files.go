package procruntime

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/hostplane/hostplane/pkg/atomicfile"
	"github.com/hostplane/hostplane/services/componentd/internal/component"
)

// WriteFiles writes files (paths relative to dir) with mode 0600, each only when its content
// differs from what is on disk, so a file a running process reads is not touched needlessly.
// It returns the paths it wrote.
func WriteFiles(dir string, files map[string][]byte) ([]string, error) {
	for _, sub := range []string{"", component.PKIDir, component.KubeconfigDir, component.LogDir, component.AuditDir} {
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
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return written, err
		}
		if err := atomicfile.Write(path, files[rel], 0o600); err != nil {
			return written, err
		}
		written = append(written, rel)
	}
	return written, nil
}
