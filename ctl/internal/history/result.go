package history

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"time"

	"github.com/heapline/heapline/ctl/internal/overhead"
)

// ParseResult reads an overhead result, the document `heapctl overhead
// --json` writes, into the engine's own type, and refuses anything the
// history could not plot honestly: missing fields, wrong types, numbers
// that are not finite, no scenarios, an interval that is upside down, a
// scenario measured twice the same way. The env and each scenario are
// decoded on their own, so one error names a fault of each, with its JSON
// path.
func ParseResult(data []byte) (overhead.Document, error) {
	var doc overhead.Document
	if len(bytes.TrimSpace(data)) == 0 {
		return doc, errors.New("malformed overhead result: empty document")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var top json.RawMessage
	if err := dec.Decode(&top); err != nil {
		return doc, fmt.Errorf("malformed overhead result: not JSON: %w", err)
	}
	if dec.More() {
		return doc, errors.New("malformed overhead result: more than one JSON document")
	}
	var v validator
	v.document(top, &doc)
	if len(v.problems) > 0 {
		return overhead.Document{}, fmt.Errorf("malformed overhead result: %s", strings.Join(v.problems, "; "))
	}
	return doc, nil
}

// ResultDate is the result's env.date, zero when it has none (ParseResult
// has checked that one present is RFC 3339).
func ResultDate(doc overhead.Document) time.Time {
	t, _ := time.Parse(time.RFC3339, doc.Env.Date)
	return t
}

// validator collects problems instead of stopping at the first, so one run
// of `history add` names them all.
type validator struct{ problems []string }

func (v *validator) bad(path, format string, args ...any) {
	v.problems = append(v.problems, path+": "+fmt.Sprintf(format, args...))
}

// kind names a JSON value's type by its first byte, for an error message.
func kind(raw json.RawMessage) string {
	switch b := bytes.TrimSpace(raw); {
	case len(b) == 0, b[0] == 'n':
		return "null"
	case b[0] == '{':
		return "an object"
	case b[0] == '[':
		return "a list"
	case b[0] == '"':
		return fmt.Sprintf("a string (%s)", b)
	case b[0] == 't', b[0] == 'f':
		return "a boolean"
	}
	return "a number"
}

// decode unmarshals raw into dst and reports a type error at path.
func (v *validator) decode(raw json.RawMessage, dst any, path string) bool {
	err := json.Unmarshal(raw, dst)
	var te *json.UnmarshalTypeError
	switch {
	case err == nil:
		return true
	case errors.As(err, &te) && te.Field != "":
		p := path + "." + te.Field
		num, isNum := strings.CutPrefix(te.Value, "number ")
		switch {
		case isNum && te.Type.Kind() == reflect.Int:
			v.bad(p, "want a whole number, got %s", num)
		case isNum:
			v.bad(p, "want a finite number, got %s", num)
		default:
			v.bad(p, "want %s, got %s", want(te.Type.Kind().String()), article(te.Value))
		}
	default:
		v.bad(path, "%v", err)
	}
	return false
}

func want(goKind string) string {
	switch goKind {
	case "float64", "int":
		return "a number"
	case "string":
		return "a string"
	case "slice":
		return "a list"
	}
	return "an object"
}

func article(jsonType string) string {
	switch jsonType {
	case "bool":
		return "a boolean"
	case "array":
		return "a list"
	case "object":
		return "an object"
	}
	return "a " + jsonType
}

// present checks that each key is in obj and not null.
func (v *validator) present(obj map[string]json.RawMessage, path string, keys ...string) bool {
	ok := true
	for _, k := range keys {
		if raw, in := obj[k]; !in || kind(raw) == "null" {
			v.bad(path+"."+k, "missing")
			ok = false
		}
	}
	return ok
}

func (v *validator) document(top json.RawMessage, doc *overhead.Document) {
	var parts map[string]json.RawMessage
	if kind(top) != "an object" {
		v.bad("top level", "want an object, got %s", kind(top))
		return
	}
	_ = json.Unmarshal(top, &parts)
	if raw, ok := parts["env"]; !ok || kind(raw) == "null" {
		v.bad("env", "missing")
	} else if kind(raw) != "an object" {
		v.bad("env", "want an object, got %s", kind(raw))
	} else {
		var keys map[string]json.RawMessage
		_ = json.Unmarshal(raw, &keys)
		if v.present(keys, "env", "cpu", "kernel", "lib_version") && v.decode(raw, &doc.Env, "env") {
			if strings.TrimSpace(doc.Env.CPU) == "" {
				v.bad("env.cpu", "empty")
			}
			if _, in := keys["date"]; in {
				if _, err := time.Parse(time.RFC3339, doc.Env.Date); err != nil {
					v.bad("env.date", "want an RFC 3339 date, got %q", doc.Env.Date)
				}
			}
		}
	}
	raw, ok := parts["scenarios"]
	var list []json.RawMessage
	switch {
	case !ok || kind(raw) == "null":
		v.bad("scenarios", "missing")
		return
	case kind(raw) != "a list":
		v.bad("scenarios", "want a list, got %s", kind(raw))
		return
	}
	_ = json.Unmarshal(raw, &list)
	if len(list) == 0 {
		v.bad("scenarios", "no scenarios")
		return
	}
	seen := map[string]int{}
	for i, el := range list {
		path := fmt.Sprintf("scenarios[%d]", i)
		if kind(el) != "an object" {
			v.bad(path, "want an object, got %s", kind(el))
			continue
		}
		var keys map[string]json.RawMessage
		_ = json.Unmarshal(el, &keys)
		var name string
		if json.Unmarshal(keys["scenario"], &name) == nil && name != "" {
			path = fmt.Sprintf("scenarios[%d] (%s)", i, name)
		}
		var r overhead.Result
		// allocs_per_s may be null (unknown: instructions mode), not absent.
		if _, in := keys["allocs_per_s"]; !in {
			v.bad(path+".allocs_per_s", "missing")
		}
		if !v.present(keys, path, "scenario", "measure", "runs", "overhead", "ci_low", "ci_high") || !v.decode(el, &r, path) {
			continue
		}
		if r.Measure != MeasureTime && r.Measure != MeasureCPU && r.Measure != MeasureInstructions {
			v.bad(path+".measure", "want %q, %q or %q, got %q", MeasureTime, MeasureCPU, MeasureInstructions, r.Measure)
		}
		if r.Runs < 1 {
			v.bad(path+".runs", "want at least 1, got %d", r.Runs)
		}
		if err := checkFigures(r.Overhead, r.CILow, r.CIHigh); err != nil {
			v.bad(path, "%v", err)
		}
		if a := r.AllocsPerS; a != nil && !(*a >= 0) {
			v.bad(path+".allocs_per_s", "want at least 0, got %g", *a)
		}
		if f := r.Floor; f != nil && (math.Abs(f.Overhead) > maxOverhead || math.Abs(f.Distance) > maxOverhead) {
			v.bad(path+".floor", "overhead %g, distance %g: beyond any measurement", f.Overhead, f.Distance)
		}
		key := r.Scenario + "/" + r.Measure
		if j, dup := seen[key]; dup {
			v.bad(path, "scenario %q measured by %s twice (also scenarios[%d])", r.Scenario, r.Measure, j)
		}
		seen[key] = i
		doc.Scenarios = append(doc.Scenarios, r)
	}
}
