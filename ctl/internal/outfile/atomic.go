package outfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// File is a file written whole or not at all: its bytes go to a temporary
// file beside path, renamed over path by Commit. A reader (or a git add
// running beside us) never sees half of it, and an earlier file at path
// stays whole until then. Its errors never name the temporary file (see
// Pathless); the caller names path as the user gave it.
type File struct {
	path   string
	tmp    *os.File
	done   bool
	direct bool // tmp is path itself: not a regular file (see Create)
}

// Create makes the temporary file beside path at once, so that a path that
// cannot be written fails before any work is done. A path that exists and
// is not a regular file (/dev/stdout, a fifo, a link to one) is written in
// place: a rename would put a file where the device or the link was.
func Create(path string) (*File, error) {
	if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() && !st.IsDir() {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			return nil, Pathless(err)
		}
		return &File{path: path, tmp: f, direct: true}, nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return nil, Pathless(err)
	}
	return &File{path: path, tmp: tmp}, nil
}

// Write writes to the temporary file.
func (f *File) Write(p []byte) (int, error) {
	n, err := f.tmp.Write(p)
	return n, Pathless(err)
}

// Commit puts the file in place (mode 0644). On failure nothing is left
// but what was at path before.
func (f *File) Commit() error {
	if f.direct {
		f.done = true
		return Pathless(f.tmp.Close())
	}
	err := f.tmp.Chmod(0o644)
	if cerr := f.tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.tmp.Name(), f.path)
	}
	f.done = true
	if err != nil {
		os.Remove(f.tmp.Name())
	}
	return Pathless(err)
}

// Abort removes the temporary file; after Commit it does nothing.
func (f *File) Abort() {
	if f == nil || f.done {
		return
	}
	f.done = true
	f.tmp.Close()
	if !f.direct {
		os.Remove(f.tmp.Name())
	}
}

// WriteFile replaces path with data in one rename.
func WriteFile(path string, data []byte) error {
	f, err := Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Abort()
		return err
	}
	return f.Commit()
}

// Pathless is err without the file name a *PathError or *LinkError adds:
// that name is the temporary file's, not the one the user gave.
func Pathless(err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		return pe.Err
	case errors.As(err, &le):
		return le.Err
	}
	return err
}
