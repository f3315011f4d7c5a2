package deploy

import (
	"fmt"
	"strings"
	"unicode"
)

// A small reader of PromQL, enough to find what an expression names: the
// metrics it selects with the labels their matchers name, the labels of its
// grouping clauses and the functions it calls. It does not evaluate or fully
// validate an expression (promtool does that for the alert rules); it only
// has to find every name, in the rules and in the dashboard's queries with
// their Grafana variables ($var, ${var}, [[var]]).

// tokKind is the kind of a token.
type tokKind int

const (
	tokIdent  tokKind = iota // a name: metric, label, function or keyword
	tokString                // a quoted string
	tokNumber                // a number or a duration
	tokVar                   // a Grafana variable
	tokRange                 // a range or subquery in brackets, skipped whole
	tokPunct                 // one character of punctuation or an operator
)

type token struct {
	kind tokKind
	text string
}

// lex splits expr into tokens, or says where it cannot.
func lex(expr string) ([]token, error) {
	var toks []token
	rs := []rune(expr)
	for i := 0; i < len(rs); {
		c := rs[i]
		switch {
		case unicode.IsSpace(c):
			i++
		case c == '#':
			for i < len(rs) && rs[i] != '\n' {
				i++
			}
		case c == '"' || c == '\'' || c == '`':
			j := i + 1
			for ; j < len(rs) && rs[j] != c; j++ {
				if rs[j] == '\\' && c != '`' {
					j++
				}
			}
			if j >= len(rs) {
				return nil, fmt.Errorf("unterminated string at offset %d", i)
			}
			toks = append(toks, token{tokString, string(rs[i+1 : j])})
			i = j + 1
		case c == '$':
			j := i + 1
			if j < len(rs) && rs[j] == '{' {
				for j < len(rs) && rs[j] != '}' {
					j++
				}
				if j >= len(rs) {
					return nil, fmt.Errorf("unterminated ${ at offset %d", i)
				}
				j++
			} else {
				for j < len(rs) && (rs[j] == '_' || unicode.IsLetter(rs[j]) || unicode.IsDigit(rs[j])) {
					j++
				}
			}
			toks = append(toks, token{tokVar, string(rs[i:j])})
			i = j
		case c == '[':
			depth, j := 0, i
			for ; j < len(rs); j++ {
				if rs[j] == '[' {
					depth++
				} else if rs[j] == ']' {
					depth--
					if depth == 0 {
						break
					}
				}
			}
			if j >= len(rs) {
				return nil, fmt.Errorf("unterminated [ at offset %d", i)
			}
			kind := tokRange
			if i+1 < len(rs) && rs[i+1] == '[' { // Grafana's old [[var]]
				kind = tokVar
			}
			toks = append(toks, token{kind, string(rs[i : j+1])})
			i = j + 1
		case c == '_' || c == ':' || unicode.IsLetter(c):
			j := i
			for j < len(rs) && (rs[j] == '_' || rs[j] == ':' || unicode.IsLetter(rs[j]) || unicode.IsDigit(rs[j])) {
				j++
			}
			toks = append(toks, token{tokIdent, string(rs[i:j])})
			i = j
		case unicode.IsDigit(c) || c == '.':
			j := i
			for j < len(rs) && (rs[j] == '.' || unicode.IsLetter(rs[j]) || unicode.IsDigit(rs[j])) {
				j++
			}
			toks = append(toks, token{tokNumber, string(rs[i:j])})
			i = j
		case strings.ContainsRune("(){},+-*/%^=!~<>@", c):
			toks = append(toks, token{tokPunct, string(c)})
			i++
		default:
			return nil, fmt.Errorf("unexpected %q at offset %d", c, i)
		}
	}
	return toks, nil
}

// selector is one metric an expression selects.
type selector struct {
	name   string   // the metric name as written, such as x_bucket
	labels []string // the labels its matchers name
	fn     string   // the function whose argument it is, "" if none
}

// refs is what an expression names.
type refs struct {
	selectors []selector
	grouping  []string // labels of by, without, on, ignoring, group_left, group_right
	functions []string
}

var (
	// keywords are PromQL's operators and modifiers spelled as words.
	keywords = set("and", "or", "unless", "bool", "offset", "inf", "nan")
	// groupings are the clauses followed by a parenthesised label list.
	groupings = set("by", "without", "on", "ignoring", "group_left", "group_right")
	// aggregations are PromQL's aggregation operators, which may take their
	// by or without clause before their arguments.
	aggregations = set("sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk", "quantile")
	// functions are PromQL's functions.
	functions = set(
		"abs", "absent", "absent_over_time", "acos", "acosh", "asin", "asinh", "atan", "atanh", "avg_over_time",
		"ceil", "changes", "clamp", "clamp_max", "clamp_min", "cos", "cosh", "count_over_time", "day_of_month",
		"day_of_week", "day_of_year", "days_in_month", "deg", "delta", "deriv", "exp", "floor", "histogram_count",
		"histogram_fraction", "histogram_quantile", "histogram_sum", "holt_winters", "hour", "idelta", "increase",
		"irate", "label_join", "label_replace", "last_over_time", "ln", "log10", "log2", "max_over_time",
		"min_over_time", "minute", "month", "pi", "predict_linear", "present_over_time", "quantile_over_time", "rad",
		"rate", "resets", "round", "scalar", "sgn", "sin", "sinh", "sort", "sort_desc", "sqrt", "stddev_over_time",
		"stdvar_over_time", "sum_over_time", "tan", "tanh", "time", "timestamp", "vector", "year",
		// the @ modifier's
		"start", "end",
	)
	// counterFuncs are the functions a counter's series belong in, and a
	// gauge's do not.
	counterFuncs = set("rate", "irate", "increase", "resets")
	// presenceFuncs ask only whether a series is there, whatever its type.
	presenceFuncs = set("absent", "absent_over_time", "present_over_time")
)

func set(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

// scan finds what expr names.
func scan(expr string) (refs, error) {
	toks, err := lex(expr)
	if err != nil {
		return refs{}, err
	}
	var r refs
	var calls []string // the open parentheses: a function's name, or "" for grouping
	pending := ""      // an aggregation written as sum by (...) (...), until its (
	is := func(i int, kind tokKind, text string) bool {
		return i < len(toks) && toks[i].kind == kind && toks[i].text == text
	}
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		switch {
		case t.kind == tokPunct && t.text == "(":
			calls = append(calls, pending)
			pending = ""
		case t.kind == tokPunct && t.text == ")":
			if len(calls) == 0 {
				return refs{}, fmt.Errorf("unbalanced )")
			}
			calls = calls[:len(calls)-1]
		case t.kind == tokPunct && t.text == "{":
			return refs{}, fmt.Errorf("a selector without a metric name ({...}): name the metric")
		case t.kind != tokIdent:
		case keywords[strings.ToLower(t.text)]:
		case groupings[strings.ToLower(t.text)]:
			if !is(i+1, tokPunct, "(") {
				continue // group_left without labels
			}
			for i += 2; !is(i, tokPunct, ")"); i++ {
				switch {
				case i >= len(toks):
					return refs{}, fmt.Errorf("%s (...: unterminated label list", t.text)
				case toks[i].kind == tokIdent:
					r.grouping = append(r.grouping, toks[i].text)
				case !is(i, tokPunct, ","):
					return refs{}, fmt.Errorf("%s (...): %q is not a label name", t.text, toks[i].text)
				}
			}
		case aggregations[t.text] && (is(i+1, tokIdent, "by") || is(i+1, tokIdent, "without")):
			r.functions = append(r.functions, t.text)
			pending = t.text
		case is(i+1, tokPunct, "("):
			if !functions[t.text] && !aggregations[t.text] {
				return refs{}, fmt.Errorf("unknown function %s()", t.text)
			}
			r.functions = append(r.functions, t.text)
			calls = append(calls, t.text)
			i++
		default:
			s := selector{name: t.text}
			if len(calls) > 0 {
				s.fn = calls[len(calls)-1]
			}
			if is(i+1, tokPunct, "{") {
				i, err = matchers(toks, i+2, &s)
				if err != nil {
					return refs{}, fmt.Errorf("%s{...}: %w", t.text, err)
				}
			}
			r.selectors = append(r.selectors, s)
		}
	}
	if len(calls) != 0 {
		return refs{}, fmt.Errorf("unbalanced (")
	}
	return r, nil
}

// matchers reads label matchers from toks[i], just after a '{', into s;
// it returns the index of the closing '}'.
func matchers(toks []token, i int, s *selector) (int, error) {
	for ; i < len(toks); i++ {
		t := toks[i]
		if t.kind == tokPunct && t.text == "}" {
			return i, nil
		}
		if t.kind == tokPunct && t.text == "," {
			continue
		}
		if t.kind != tokIdent {
			return 0, fmt.Errorf("%q where a label name should be", t.text)
		}
		s.labels = append(s.labels, t.text)
		op := ""
		for i++; i < len(toks) && toks[i].kind == tokPunct && strings.Contains("=!~", toks[i].text); i++ {
			op += toks[i].text
		}
		if op != "=" && op != "!=" && op != "=~" && op != "!~" {
			return 0, fmt.Errorf("label %s: %q is not a matcher (=, !=, =~, !~)", t.text, op)
		}
		if i >= len(toks) || (toks[i].kind != tokString && toks[i].kind != tokVar) {
			return 0, fmt.Errorf("label %s%s: want a quoted value", t.text, op)
		}
	}
	return 0, fmt.Errorf("unterminated {")
}

// catalogue is metrics.txt by name.
type catalogue map[string]Metric

func newCatalogue(ms []Metric) catalogue {
	c := make(catalogue, len(ms))
	for _, m := range ms {
		c[m.Name] = m
	}
	return c
}

// resolve finds the listed metric a series name belongs to: the metric
// itself, or a histogram's _bucket, _sum or _count series (bucket is true
// for _bucket).
func (c catalogue) resolve(name string) (m Metric, bucket bool, err error) {
	if m, ok := c[name]; ok {
		if m.Type == Histogram {
			return Metric{}, false, fmt.Errorf("histogram %s is queried as %[1]s_bucket, %[1]s_sum or %[1]s_count", name)
		}
		return m, false, nil
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if m, ok := c[base]; ok && m.Type == Histogram {
				return m, suffix == "_bucket", nil
			}
		}
	}
	return Metric{}, false, fmt.Errorf("unknown metric %s (not in metrics.txt)", name)
}

// check reports what in expr does not agree with the catalogue: an unknown
// metric or function, a label the metric does not have (in a matcher or a
// grouping clause), a counter's series outside rate, irate or increase, or
// a gauge inside one of them. It returns the names of the listed metrics
// that expr uses.
func (c catalogue) check(expr string) ([]string, error) {
	r, err := scan(expr)
	if err != nil {
		return nil, err
	}
	var used []string
	type series struct {
		m      Metric
		bucket bool
	}
	var all []series
	for _, s := range r.selectors {
		m, bucket, err := c.resolve(s.name)
		if err != nil {
			return nil, err
		}
		for _, l := range s.labels {
			if !m.HasLabel(l, bucket) {
				return nil, fmt.Errorf("%s has no label %s (its labels: %s)", s.name, l, labelList(m, bucket))
			}
		}
		cumulative := m.Type == Counter || m.Type == Histogram // a histogram's series are counters
		switch {
		case cumulative && !counterFuncs[s.fn] && !presenceFuncs[s.fn]:
			return nil, fmt.Errorf("%s only goes up: take its rate() or increase(), not %s", s.name, describeFn(s.fn))
		case !cumulative && counterFuncs[s.fn]:
			return nil, fmt.Errorf("%s is a gauge: %s() of it means nothing (deriv() or delta() is for a gauge)", s.name, s.fn)
		}
		used = append(used, m.Name)
		all = append(all, series{m, bucket})
	}
	for _, l := range r.grouping {
		ok := false
		for _, s := range all {
			ok = ok || s.m.HasLabel(l, s.bucket)
		}
		if !ok {
			return nil, fmt.Errorf("grouping by %s, a label none of its metrics has", l)
		}
	}
	return used, nil
}

func describeFn(fn string) string {
	if fn == "" {
		return "its raw value"
	}
	return fn + "() of it"
}

func labelList(m Metric, bucket bool) string {
	ls := append([]string(nil), m.Labels...)
	ls = append(ls, ImplicitLabels...)
	if bucket {
		ls = append(ls, "le")
	}
	return strings.Join(ls, ", ")
}
