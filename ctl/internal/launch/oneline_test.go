package launch

import (
	"strings"
	"testing"

	"github.com/heapline/heapline/ctl/internal/region/cdefs"
)

// heapctl reads HEAPLINE_SUMMARY as the shim does: the words are region.h's,
// every one of them, and nothing else.
func TestSummaryWordsAreTheShims(t *testing.T) {
	c := cdefs.Strings()
	for name, goWords := range map[string]string{
		"HL_WORDS_OFF": summaryOffWords,
		"HL_WORDS_ON":  summaryOnWords,
		"HL_WORDS_ALL": summaryAllWords,
	} {
		if c[name] != goWords {
			t.Errorf("%s: region.h %q, launch %q", name, c[name], goWords)
		}
	}
	for words, want := range map[string]SummaryMode{c["HL_WORDS_OFF"]: SummaryNone, c["HL_WORDS_ON"]: SummaryOne, c["HL_WORDS_ALL"]: SummaryAll} {
		for _, w := range strings.Fields(words) {
			if got, ok := ParseSummaryMode(w); !ok || got != want {
				t.Errorf("ParseSummaryMode(%q) = %v, %v; want %v, true", w, got, ok, want)
			}
		}
	}
	for _, w := range []string{"maybe", "ALL", " 1", "2"} {
		if _, ok := ParseSummaryMode(w); ok {
			t.Errorf("ParseSummaryMode(%q) takes a word the shim does not", w)
		}
	}
}
