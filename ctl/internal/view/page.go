package view

import (
	"fmt"
	"html"
	"strings"

	"github.com/heapline/heapline/ctl/internal/follow"
	"github.com/heapline/heapline/ctl/internal/report"
	"github.com/heapline/heapline/ctl/internal/rss"
	"github.com/heapline/heapline/ctl/internal/snapshot"
	"github.com/heapline/heapline/ctl/internal/timeline"
)

// The page is plain HTML: no script, one table or one inline SVG.
const pageHead = `<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>%s</title>
<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{padding:.2em .8em;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}tr.sum td{border-top:1px solid #000;font-weight:bold}</style>
</head><body><p><a href="./">back to the profile</a></p><h1>%s</h1>
`

// RSSPage is where a live process's resident memory went, read now (as
// heapctl show prints it on its rss line).
func RSSPage(pid int) func(*strings.Builder) error {
	return func(w *strings.Builder) error {
		ent := snapshot.Of(pid, snapshot.Options{RSS: snapshot.ReadRSS})
		if err := follow.RegionError(pid, ent.Entry, true); err != nil {
			return err
		}
		if ent.RSSErr != nil {
			return ent.RSSErr
		}
		if ent.RSS == nil {
			return fmt.Errorf("process %d no longer runs under the shim (it exec'd without it, or is exiting): its resident memory is not its counters' heap", pid)
		}
		b := *ent.RSS
		title := fmt.Sprintf("Where the RSS of %s (pid %d) went", report.Clip(ent.Summary.Command, 120), pid)
		fmt.Fprintf(w, pageHead, html.EscapeString(title), html.EscapeString(title))
		fmt.Fprintf(w, "<table id=\"rss\">\n<tr><th>part</th><th>bytes</th><th></th></tr>\n")
		for _, part := range Parts(b) {
			fmt.Fprintf(w, "<tr><td>%s</td><td class=\"n\" data-bytes=\"%d\">%d</td><td>%s</td></tr>\n",
				part.Name, part.Bytes, part.Bytes, report.Bytes(part.Bytes))
		}
		fmt.Fprintf(w, "<tr class=\"sum\"><td>rss</td><td class=\"n\" data-bytes=\"%d\" id=\"rss-total\">%d</td><td>%s</td></tr>\n</table>\n",
			b.RSSBytes, b.RSSBytes, report.Bytes(b.RSSBytes))
		if h := b.Hint(); h != "" {
			fmt.Fprintf(w, "<p>%s</p>\n", html.EscapeString(h))
		}
		fmt.Fprint(w, "</body></html>\n")
		return nil
	}
}

// Part is one part of the RSS.
type Part struct {
	Name  string
	Bytes int64
}

// Parts are the parts of b that add up to its RSS, in show's order.
func Parts(b rss.Breakdown) []Part {
	return []Part{
		{"live", b.LiveBytes}, {"mapped", b.MappedBytes}, {"retained by malloc", b.RetainedBytes},
		{"stacks", b.StackBytes}, {"files", b.FileBytes}, {"shared", b.ShmemBytes},
		{"sample arena", b.SampleArenaBytes}, {"other", b.OtherBytes},
	}
}

// LinePage is the heap line over time, record's chart.
func LinePage(title string, samples []timeline.Sample) func(*strings.Builder) error {
	return func(w *strings.Builder) error {
		fmt.Fprintf(w, pageHead, html.EscapeString(title), html.EscapeString(title))
		if err := (timeline.Chart{Title: title}).WriteSVG(w, samples); err != nil {
			return err
		}
		fmt.Fprint(w, "\n</body></html>\n")
		return nil
	}
}
