// Package outfile checks, before a command is started, that heapctl will
// be able to write what it promises: a summary or a chart lost after a
// long job is the worst time to learn of a typo in its path.
package outfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// Check says whether path can be written, flag naming it in the error
// ("-o", "--svg"). It changes nothing: an existing file is opened for
// writing without truncation and closed, a new one is created and removed.
func Check(flag, path string) error {
	if path == "" {
		return nil
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("%s %s: is a directory", flag, path)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			f.Close()
			return os.Remove(path)
		}
	}
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("%s %s: cannot write it: %w", flag, path, err)
	}
	return f.Close()
}
