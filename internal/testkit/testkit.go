// Package testkit holds the helpers that tests of more than one package
// need (ctl's, bpf's and preload/shimtest's): the shim and heapctl built
// as make builds them, processes, polling, the guard of tests that need
// root or a tool, C programs, a stand-in library, git and SVG. Only
// tests import it. It is not under ctl/ so that preload/shimtest may
// import it too (Go's internal rule).
package testkit

import (
	"bytes"
	"encoding/xml"
	"io"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// DeadPID is the pid of a process that has exited and been reaped.
func DeadPID(t testing.TB) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// NopLib builds a shared library whose malloc forwards to glibc's and does
// nothing else. It stands for libheap.so where a test needs "a malloc
// interposer in LD_PRELOAD", not the shim, so such tests do not depend on
// the shim being built (heapctl refuses a library without malloc).
func NopLib(t testing.TB) string {
	t.Helper()
	return CCode(t, "nop.c", "#include <stddef.h>\n"+
		"void *__libc_malloc(size_t);\n"+
		"void *malloc(size_t n) { return __libc_malloc(n); }\n", "-shared", "-fPIC")
}

// Git runs git in dir with a fixed identity and returns its trimmed output.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// SVGTokens hands fn each token of the XML in b, failing the test where
// it is not XML: the one walk of SVGTextsAt, chartBoxes and the tests' own
// readers of charts.
func SVGTokens(t testing.TB, b []byte, fn func(xml.Token)) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("SVG is not XML: %v", err)
		}
		fn(tok)
	}
}

// SVGTexts parses b as XML whose root is <svg> (failing the test if it is
// not) and returns the character data of its <text> elements.
func SVGTexts(t testing.TB, b []byte) []string {
	t.Helper()
	var texts []string
	for _, x := range SVGTextsAt(t, b) {
		texts = append(texts, x.Text)
	}
	return texts
}

// SVGText is one <text> element and where it is: X from the left, Y up
// from the bottom, in points (gonum draws text flipped, scale(1, -1), so Y
// is minus its y attribute; an unflipped one, rotated, keeps NaN).
type SVGText struct {
	Text string
	X, Y float64
}

// SVGTextsAt is SVGTexts with each text's position.
func SVGTextsAt(t testing.TB, b []byte) []SVGText {
	t.Helper()
	var texts []SVGText
	var cur *SVGText
	root := ""
	SVGTokens(t, b, func(tok xml.Token) {
		switch v := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = v.Name.Local
			}
			cur = nil
			if v.Name.Local == "text" {
				cur = &SVGText{X: math.NaN(), Y: math.NaN()}
				var y float64
				flipped := false
				for _, a := range v.Attr {
					switch a.Name.Local {
					case "x":
						cur.X, _ = strconv.ParseFloat(a.Value, 64)
					case "y":
						y, _ = strconv.ParseFloat(a.Value, 64)
					case "transform":
						flipped = a.Value == "scale(1, -1)"
					}
				}
				if flipped {
					cur.Y = -y
				}
			}
		case xml.CharData:
			if cur != nil {
				cur.Text = string(v)
				texts = append(texts, *cur)
				cur = nil
			}
		case xml.EndElement:
			cur = nil
		}
	})
	if root != "svg" {
		t.Fatalf("root element %q, want svg", root)
	}
	return texts
}
