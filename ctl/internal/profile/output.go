package profile

import (
	"errors"
	"fmt"
	"io"
	"os"

	pprof "github.com/google/pprof/profile"
	"golang.org/x/term"

	"github.com/heapline/heapline/ctl/internal/outfile"
)

// Output is a profile file about to be written. It is created beside its
// final name at once, so that a path that cannot be written fails before
// anything is read or run, and renamed over that name only when complete:
// an earlier profile there stays whole until then (outfile.File).
type Output struct {
	path   string
	f      *outfile.File
	stdout io.Writer // for "-"
}

// Create prepares path for a profile; "-" is stdout.
func Create(path string, stdout io.Writer) (*Output, error) {
	switch path {
	case "":
		return nil, errors.New("no output file (-o FILE, or - for stdout)")
	case "-":
		if f, ok := stdout.(interface{ Fd() uintptr }); ok && term.IsTerminal(int(f.Fd())) {
			return nil, errors.New("-o - would write a gzipped profile to the terminal: redirect stdout (> FILE, | go tool pprof ...) or give -o FILE")
		}
		return &Output{path: path, stdout: stdout}, nil
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("%s is a directory", path)
	}
	f, err := outfile.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cannot write %s: %w", path, err)
	}
	return &Output{path: path, f: f}, nil
}

// Write writes p gzipped (profile.Write) and puts it in place.
func (o *Output) Write(p *pprof.Profile) error {
	if o.f == nil {
		return p.Write(o.stdout)
	}
	err := p.Write(o.f)
	if err == nil {
		err = o.f.Commit()
	}
	if err != nil {
		o.f.Abort()
		return fmt.Errorf("writing %s: %w", o.path, err)
	}
	return nil
}

// Abort removes what Create made; after Write it does nothing.
func (o *Output) Abort() {
	if o.f != nil {
		o.f.Abort()
	}
}
