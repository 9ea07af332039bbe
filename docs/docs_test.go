// Package docs holds no code. Its test checks the pages of this folder and
// the README: their links and anchors resolve, the sections that code
// comments cite by name exist, and reference pages do not speak of what a
// reader cannot see (clock times, issue numbers). Pages are edited by
// several people at once; this is what keeps a merge from breaking them.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// pages returns README.md and docs/*.md, by path from the repository root,
// with their text.
func pages(t *testing.T) map[string]string {
	t.Helper()
	names, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range append(names, "../README.md") {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Clean(filepath.Join("docs", n))] = string(b)
	}
	return out
}

var (
	heading  = regexp.MustCompile(`(?m)^#+ +(.+?) *$`)
	notSlug  = regexp.MustCompile(`[^\p{L}\p{N}_\- ]`)
	mdLink   = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	codeSpan = regexp.MustCompile("(?s)```.*?```")
)

// anchors returns the ids GitHub gives the headings of a page: lower case,
// punctuation dropped, spaces made hyphens.
func anchors(text string) []string {
	var ids []string
	for _, m := range heading.FindAllStringSubmatch(codeSpan.ReplaceAllString(text, ""), -1) {
		id := strings.ToLower(notSlug.ReplaceAllString(m[1], ""))
		ids = append(ids, strings.ReplaceAll(id, " ", "-"))
	}
	return ids
}

func TestLinks(t *testing.T) {
	all := pages(t)
	for page, text := range all {
		for _, m := range mdLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(text, ""), -1) {
			target := m[1]
			if strings.Contains(target, "://") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
			}
			// page paths are from the root; this test runs in docs/.
			if _, err := os.Stat(filepath.Join("..", path)); err != nil {
				t.Errorf("%s: link %s: %v", page, target, err)
				continue
			}
			if frag == "" || !strings.HasSuffix(path, ".md") {
				continue
			}
			b, err := os.ReadFile(filepath.Join("..", path))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(anchors(string(b)), frag) {
				t.Errorf("%s: link %s: %s has no heading with that anchor", page, target, path)
			}
		}
	}
}

// A comment such as `docs/performance.md, "What loading costs"` or
// `docs/performance.md's "What the Go runtime cost"` names a section.
var cited = regexp.MustCompile(`docs/([a-z]+\.md)(?:'s)?,? \\?"([^"\\]+)\\?"`)

func TestCitedSections(t *testing.T) {
	var found int
	err := filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name != ".." && (strings.HasPrefix(name, ".") && name != ".github" && name != ".ci" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".c", ".h", ".cc", ".sh", ".py", ".yml", ".md", ".golden":
		default:
			if filepath.Base(path) != "Makefile" {
				return nil
			}
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range cited.FindAllStringSubmatch(string(b), -1) {
			found++
			page, err := os.ReadFile(m[1])
			if err != nil {
				t.Errorf("%s cites docs/%s: %v", path, m[1], err)
				continue
			}
			id := strings.ReplaceAll(strings.ToLower(notSlug.ReplaceAllString(m[2], "")), " ", "-")
			if !slices.Contains(anchors(string(page)), id) {
				t.Errorf("%s cites section %q of docs/%s, which has no such heading", path, m[2], m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found == 0 {
		t.Fatal("no cited section found: the pattern no longer matches the code's comments")
	}
}

// What a reference page must not say: it reads as a lab notebook, or points
// at something the reader cannot see. Dated runs go in journal.md.
var notebook = regexp.MustCompile(`(?i)\bissue \d|\bthe issue\b|earlier tool|this page said|\b\d{1,2}:\d{2} UTC\b|\bat \d{1,2}:\d{2}\b`)

func TestReferencePagesSayNow(t *testing.T) {
	for page, text := range pages(t) {
		if page == filepath.Join("docs", "journal.md") {
			continue
		}
		for i, line := range strings.Split(text, "\n") {
			if m := notebook.FindString(line); m != "" {
				t.Errorf("%s:%d: %q belongs in docs/journal.md, dated, or should go: %s", page, i+1, m, line)
			}
		}
	}
}
