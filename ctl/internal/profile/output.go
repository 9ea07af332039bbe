package profile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	pprof "github.com/google/pprof/profile"
)

// Output is a profile file about to be written. It is created beside its
// final name at once, so that a path that cannot be written fails before
// anything is read or run, and renamed over that name only when complete:
// an earlier profile there stays whole until then.
type Output struct {
	path   string
	tmp    *os.File
	stdout io.Writer // for "-"
}

// Create prepares path for a profile; "-" is stdout.
func Create(path string, stdout io.Writer) (*Output, error) {
	switch path {
	case "":
		return nil, errors.New("no output file (-o FILE, or - for stdout)")
	case "-":
		return &Output{path: path, stdout: stdout}, nil
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("%s is a directory", path)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the name of the temporary file says nothing
		}
		return nil, fmt.Errorf("cannot write %s: %w", path, err)
	}
	return &Output{path: path, tmp: tmp}, nil
}

// Write writes p gzipped (profile.Write) and puts it in place.
func (o *Output) Write(p *pprof.Profile) error {
	if o.tmp == nil {
		return p.Write(o.stdout)
	}
	err := p.Write(o.tmp)
	if err == nil {
		err = o.tmp.Chmod(0o644)
	}
	if cerr := o.tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(o.tmp.Name(), o.path)
	}
	if err != nil {
		os.Remove(o.tmp.Name())
		// the temporary file's name says nothing to the user
		var pe *fs.PathError
		var le *os.LinkError
		switch {
		case errors.As(err, &pe):
			err = pe.Err
		case errors.As(err, &le):
			err = le.Err
		}
		return fmt.Errorf("writing %s: %w", o.path, err)
	}
	return nil
}

// Abort removes what Create made; after Write it does nothing.
func (o *Output) Abort() {
	if o.tmp != nil {
		o.tmp.Close()
		os.Remove(o.tmp.Name())
	}
}
