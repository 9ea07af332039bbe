package timeline

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/heapline/heapline/internal/heapjson"
)

// CSVHeader is the first line of a CSV timeline; its columns are the JSON
// names of Sample's fields, in order.
var CSVHeader = []string{"time_s", "live_bytes", "live_blocks", "allocs", "frees", "peak_live_bytes", "mapped_bytes", "exec", "py_objects", "py_object_bytes", "rss_bytes", "retained_bytes"}

// How many columns a timeline had before mapped_bytes and exec, before
// the Python columns, and before rss_bytes and retained_bytes: ReadCSV
// reads those too.
const (
	oldColumns  = 6
	execColumns = 8
	pyColumns   = 10
)

// Writer takes the samples of one recording as they come and, at Close, the
// exit summary of the process when there is one, with the sample it makes.
type Writer interface {
	Add(p Sample, s heapjson.Summary) error
	Close(final *heapjson.Summary, p Sample) error
}

// Discard takes samples and writes nothing: a recording without a
// timeline file (record --profiles alone).
var Discard Writer = discard{}

type discard struct{}

func (discard) Add(Sample, heapjson.Summary) error    { return nil }
func (discard) Close(*heapjson.Summary, Sample) error { return nil }

// Create opens path for a timeline in the format its extension names:
// .csv (one row a sample, written as it comes, so a recording cut short
// keeps what it had) or .json (one document written at Close).
func Create(path string) (Writer, error) {
	if err := CheckName(path); err != nil {
		return nil, err
	}
	ext := strings.ToLower(filepath.Ext(path))
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("creating timeline: %w", err)
	}
	if ext == ".json" {
		return &jsonWriter{f: f}, nil
	}
	w, err := NewCSV(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return w, nil
}

// CheckName says whether Create would know the format of path, without
// creating anything.
func CheckName(path string) error {
	ext := strings.ToLower(filepath.Ext(path))
	if ext != ".csv" && ext != ".json" {
		return fmt.Errorf("%s: unknown timeline format %q (name the file .csv or .json)", path, ext)
	}
	return nil
}

// CSVWriter writes a timeline as CSV and flushes every row, so a reader (or
// `tail -f`) sees each sample as soon as it is taken.
type CSVWriter struct {
	w      *csv.Writer
	closer io.Closer
}

// NewCSV writes the header to w; Close closes w when it is an io.Closer.
func NewCSV(w io.Writer) (*CSVWriter, error) {
	c := &CSVWriter{w: csv.NewWriter(w)}
	if cl, ok := w.(io.Closer); ok {
		c.closer = cl
	}
	if err := c.row(CSVHeader); err != nil {
		return nil, err
	}
	return c, nil
}

// Add writes one sample.
func (c *CSVWriter) Add(p Sample, _ heapjson.Summary) error { return c.AddSample(p) }

// AddSample writes one sample.
func (c *CSVWriter) AddSample(p Sample) error {
	return c.row([]string{
		strconv.FormatFloat(p.TimeS, 'f', 6, 64),
		strconv.FormatInt(p.LiveBytes, 10),
		strconv.FormatInt(p.LiveBlocks, 10),
		strconv.FormatUint(p.Allocs, 10),
		strconv.FormatUint(p.Frees, 10),
		strconv.FormatInt(p.PeakLiveBytes, 10),
		strconv.FormatInt(p.MappedBytes, 10),
		p.Exec,
		strconv.FormatInt(p.PyObjects, 10),
		strconv.FormatInt(p.PyObjectBytes, 10),
		strconv.FormatInt(p.RSSBytes, 10),
		strconv.FormatInt(p.RetainedBytes, 10),
	})
}

func (c *CSVWriter) row(r []string) error {
	if err := c.w.Write(r); err != nil {
		return fmt.Errorf("writing timeline: %w", err)
	}
	c.w.Flush()
	if err := c.w.Error(); err != nil {
		return fmt.Errorf("writing timeline: %w", err)
	}
	return nil
}

// Close writes the final summary's sample p as the last row, then closes.
func (c *CSVWriter) Close(final *heapjson.Summary, p Sample) error {
	var err error
	if final != nil {
		err = c.AddSample(p)
	}
	if c.closer != nil {
		err = errors.Join(err, c.closer.Close())
	}
	return err
}

// Document is the JSON form of a timeline.
type Document struct {
	PID     int               `json:"pid"`
	Command string            `json:"command"`
	Samples []Sample          `json:"samples"`
	Summary *heapjson.Summary `json:"summary,omitempty"` // the exit summary, when the process gave one
}

type jsonWriter struct {
	f   *os.File
	doc Document
}

func (j *jsonWriter) Add(p Sample, s heapjson.Summary) error {
	if len(j.doc.Samples) == 0 {
		j.doc.PID, j.doc.Command = s.PID, s.Command
	}
	j.doc.Samples = append(j.doc.Samples, p)
	return nil
}

func (j *jsonWriter) Close(final *heapjson.Summary, p Sample) error {
	if final != nil {
		j.Add(p, *final)
		j.doc.Summary = final
	}
	if j.doc.Samples == nil {
		j.doc.Samples = []Sample{}
	}
	enc := json.NewEncoder(j.f)
	enc.SetIndent("", "  ")
	err := enc.Encode(j.doc)
	if err != nil {
		err = fmt.Errorf("writing timeline: %w", err)
	}
	return errors.Join(err, j.f.Close())
}

// ReadCSV reads a timeline written by CSVWriter, or by one from before
// the exec column.
func ReadCSV(r io.Reader) ([]Sample, error) {
	cr := csv.NewReader(bufio.NewReader(r))
	cr.FieldsPerRecord = -1
	rows, err := cr.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("reading timeline: %w", err)
	}
	head := ""
	if len(rows) > 0 {
		head = strings.Join(rows[0], ",")
	}
	cols := len(CSVHeader)
	switch head {
	case strings.Join(CSVHeader, ","):
	case strings.Join(CSVHeader[:pyColumns], ","):
		cols = pyColumns
	case strings.Join(CSVHeader[:execColumns], ","):
		cols = execColumns
	case strings.Join(CSVHeader[:oldColumns], ","):
		cols = oldColumns
	default:
		return nil, errors.New("reading timeline: missing header " + strings.Join(CSVHeader, ","))
	}
	out := make([]Sample, 0, len(rows)-1)
	for i, r := range rows[1:] {
		if len(r) != cols {
			return nil, fmt.Errorf("reading timeline: line %d: %d fields, want %d", i+2, len(r), cols)
		}
		var s Sample
		var errs [11]error
		if cols >= execColumns {
			s.MappedBytes, errs[6] = strconv.ParseInt(r[6], 10, 64)
			s.Exec = r[7]
		}
		if cols >= pyColumns {
			s.PyObjects, errs[7] = strconv.ParseInt(r[8], 10, 64)
			s.PyObjectBytes, errs[8] = strconv.ParseInt(r[9], 10, 64)
		}
		if cols == len(CSVHeader) {
			s.RSSBytes, errs[9] = strconv.ParseInt(r[10], 10, 64)
			s.RetainedBytes, errs[10] = strconv.ParseInt(r[11], 10, 64)
		}
		s.TimeS, errs[0] = strconv.ParseFloat(r[0], 64)
		s.LiveBytes, errs[1] = strconv.ParseInt(r[1], 10, 64)
		s.LiveBlocks, errs[2] = strconv.ParseInt(r[2], 10, 64)
		s.Allocs, errs[3] = strconv.ParseUint(r[3], 10, 64)
		s.Frees, errs[4] = strconv.ParseUint(r[4], 10, 64)
		s.PeakLiveBytes, errs[5] = strconv.ParseInt(r[5], 10, 64)
		if err := errors.Join(errs[:]...); err != nil {
			return nil, fmt.Errorf("reading timeline: line %d: %w", i+2, err)
		}
		out = append(out, s)
	}
	return out, nil
}
