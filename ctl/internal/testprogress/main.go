// Command testprogress reads `go test -json` and says what is going on:
// which package is being tested as it starts, each package's result as it
// ends, and the whole output of every test that failed. `make test` pipes
// through it; ctl's tests alone once took three minutes without a word.
//
//	go test -json ./... 2>&1 | go run ./ctl/internal/testprogress
//
// It exits 1 if a test or a package failed.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

func main() { os.Exit(filter(os.Stdin, os.Stdout)) }

func filter(r io.Reader, w io.Writer) int {
	failed := false
	held := map[string][]string{} // output by package and test, until its end
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		var e event
		if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &e) != nil {
			fmt.Fprintln(w, line) // go's own words: a build error, vet
			continue
		}
		key := e.Package + " " + e.Test
		switch {
		case e.Action == "start" && e.Test == "":
			fmt.Fprintf(w, "testing %s\n", e.Package)
		case e.Action == "output" || e.Action == "build-output":
			held[key] = append(held[key], e.Output)
		case e.Action == "fail":
			failed = true
			if e.Test != "" {
				fmt.Fprint(w, strings.Join(held[key], ""))
			} else {
				for _, l := range held[key] {
					if !strings.HasPrefix(l, "=== ") && !strings.HasPrefix(l, "PASS") {
						fmt.Fprint(w, l)
					}
				}
			}
			delete(held, key)
		case (e.Action == "pass" || e.Action == "skip") && e.Test == "":
			// the package's own "ok  pkg  12.3s" (or "no test files")
			for _, l := range held[key] {
				if strings.HasPrefix(l, "ok") || strings.HasPrefix(l, "?") {
					fmt.Fprint(w, l)
				}
			}
			delete(held, key)
		case e.Action == "pass" || e.Action == "skip":
			delete(held, key)
		}
	}
	if failed {
		return 1
	}
	return 0
}
