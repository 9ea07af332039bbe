package history

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// StoreFile is the store's one file inside its directory.
const StoreFile = "points.jsonl"

// Append adds points to dir/points.jsonl, creating both if needed. The
// batch goes out in one write(2) on an O_APPEND descriptor while holding an
// exclusive flock on the file: concurrent adds (goroutines, processes, two
// CI steps sharing a workspace) never interleave or lose a line, and the
// lines already there are never touched.
func Append(dir string, pts []Point) error {
	if len(pts) == 0 {
		return errors.New("no points to add")
	}
	var batch bytes.Buffer
	for _, p := range pts {
		b, err := json.Marshal(p)
		if err != nil {
			return fmt.Errorf("encoding point %s/%s: %w", p.Scenario, p.Measure, err)
		}
		batch.Write(b)
		batch.WriteByte('\n')
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	path := filepath.Join(dir, StoreFile)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	defer f.Close()
	if err := flock(f); err != nil {
		return fmt.Errorf("store: locking %s: %w", path, err)
	}
	defer unix.Flock(int(f.Fd()), unix.LOCK_UN)

	// A writer killed mid-line (disk full, a crash on another filesystem)
	// leaves a last line without its newline. Start ours on a line of its
	// own so only that damaged line is lost, not ours with it.
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	out := batch.Bytes()
	if st.Size() > 0 {
		last := make([]byte, 1)
		r, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("store: %w", err)
		}
		_, err = r.ReadAt(last, st.Size()-1)
		r.Close()
		if err != nil {
			return fmt.Errorf("store: reading %s: %w", path, err)
		}
		if last[0] != '\n' {
			out = append([]byte{'\n'}, out...)
		}
	}
	n, err := f.Write(out)
	if err != nil {
		return fmt.Errorf("store: writing %s: %w", path, err)
	}
	if n != len(out) {
		return fmt.Errorf("store: short write to %s: %d of %d bytes", path, n, len(out))
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return nil
}

// flock takes the exclusive lock, retrying if a signal interrupts the wait
// (the Go runtime's preemption signals do).
func flock(f *os.File) error {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// BadLine is a store line that could not be read.
type BadLine struct {
	Line int
	Err  error
}

func (b BadLine) Error() string { return fmt.Sprintf("%s line %d: %v", StoreFile, b.Line, b.Err) }

// Load reads every point of the store in line order. Damaged lines are
// returned beside the points rather than failing the whole store: the
// store is append-only, so one bad line would otherwise break every later
// render and check. A missing directory or file is an error (a mistyped
// --store should not look like an empty history); an empty file is not.
func Load(dir string) ([]Point, []BadLine, error) {
	path := filepath.Join(dir, StoreFile)
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil, fmt.Errorf("store %s: no %s (add a result first)", dir, StoreFile)
		}
		return nil, nil, fmt.Errorf("store: %w", err)
	}
	defer f.Close()
	// Readers take the lock shared so they never see half of a batch.
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_SH)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EINTR) {
			return nil, nil, fmt.Errorf("store: locking %s: %w", path, err)
		}
	}
	defer unix.Flock(int(f.Fd()), unix.LOCK_UN)

	var pts []Point
	var bad []BadLine
	r := bufio.NewReader(f)
	for line := 1; ; line++ {
		b, err := r.ReadBytes('\n')
		if len(b) > 0 {
			text := bytes.TrimSpace(b)
			if len(text) > 0 {
				p, perr := parseLine(text, line)
				if perr != nil {
					bad = append(bad, BadLine{Line: line, Err: perr})
				} else {
					pts = append(pts, p)
				}
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("store: reading %s: %w", path, err)
		}
	}
	FullCommits(pts)
	return pts, bad, nil
}
