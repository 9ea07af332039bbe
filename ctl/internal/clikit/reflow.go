package clikit

import "strings"

// HelpWidth is the column at which Reflow wraps a command's description;
// the help prints it indented by three.
const HelpWidth = 92

// Reflow wraps the prose of a command's description at width: the lines
// of a paragraph (those that do not start with a space) are joined and
// filled again, so a description can be written without counting columns;
// indented lines (a table of scenarios) and blank lines stay as they are.
func Reflow(s string, width int) string {
	var out, para []string
	flush := func() {
		if len(para) == 0 {
			return
		}
		line := ""
		for _, w := range strings.Fields(strings.Join(para, " ")) {
			switch {
			case line == "":
				line = w
			case len(line)+1+len(w) > width:
				out = append(out, line)
				line = w
			default:
				line += " " + w
			}
		}
		out = append(out, line)
		para = para[:0]
	}
	for _, l := range strings.Split(s, "\n") {
		if l == "" || strings.HasPrefix(l, " ") {
			flush()
			out = append(out, l)
			continue
		}
		para = append(para, l)
	}
	flush()
	return strings.Join(out, "\n")
}
