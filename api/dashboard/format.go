package dashboard

import (
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"strings"
	"time"
)

func (d *Dashboard) funcs() template.FuncMap {
	return template.FuncMap{
		"stamp": func(t any) string {
			switch v := t.(type) {
			case time.Time:
				if v.IsZero() {
					return "—"
				}
				return v.UTC().Format("2006-01-02 15:04:05.000")
			case *time.Time:
				if v == nil || v.IsZero() {
					return "—"
				}
				return v.UTC().Format("2006-01-02 15:04:05.000")
			}
			return "—"
		},
		"iso": func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) },
		"ago": func(t any) string {
			var tt time.Time
			switch v := t.(type) {
			case time.Time:
				tt = v
			case *time.Time:
				if v == nil {
					return "—"
				}
				tt = *v
			}
			if tt.IsZero() {
				return "—"
			}
			return fmtDuration(d.cfg.Now().Sub(tt)) + " ago"
		},
		"dur":    fmtDuration,
		"secs":   func(s float64) string { return fmtDuration(time.Duration(s * float64(time.Second))) },
		"path":   d.path,
		"first":  firstLine,
		"f1":     func(f float64) string { return fmt.Sprintf("%.1f", f) },
		"pct":    func(a, b int) int { return int(math.Round(100 * float64(a) / math.Max(1, float64(b)))) },
		"join":   strings.Join,
		"short":  shortID,
		"query":  func(s string) string { return urlQueryEscape(s) },
		"pretty": prettyJSON,
		"add":    func(a, b int) int { return a + b },
		"contains": func(list []string, s string) bool {
			for _, x := range list {
				if x == s {
					return true
				}
			}
			return false
		},
	}
}

// shortID shortens a run id for a table: its first 8 and last 6
// characters (a UUIDv7 starts with its time, alike for runs created
// together).
func shortID(id string) string {
	if len(id) <= 16 {
		return id
	}
	return id[:8] + "…" + id[len(id)-6:]
}

// fmtDuration formats a duration for a person: 850ms, 4.2s, 3m10s, 2h5m,
// 3d4h.
func fmtDuration(d time.Duration) string {
	if d < 0 {
		d = -d
	}
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return shorten(s, 160)
}

// inputRows is the height of the trigger form's textarea: the input's
// lines, between 5 and 20.
func inputRows(input string) int {
	return min(max(strings.Count(input, "\n")+1, 5), 20)
}

// prettyJSON indents a JSON value for a form to edit; "" for none. A
// value that indents to more than maxShown bytes and four times its size
// (a deeply nested one) is returned as it is, whole.
func prettyJSON(b []byte) string {
	if len(b) == 0 || string(b) == "null" {
		return ""
	}
	if !json.Valid(b) {
		return string(b)
	}
	text, cut := indent(b, max(maxShown, 4*len(b)))
	if cut {
		return string(b)
	}
	return text
}
