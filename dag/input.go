package dag

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// A workflow's input contract: an example input (what a form is
// prefilled with, what a reader copies) and a JSON Schema every run's
// input must match, checked when the run is triggered.

// Errors of [ExampleInput] and [InputSchema], wrapped by the
// *[DefinitionError] that Build returns.
var (
	// ErrBadSchema reports an input schema that is not JSON, does not
	// compile, refers to another document or is too large.
	ErrBadSchema = errors.New("dag: bad input schema")
	// ErrBadExample reports an example input that is not JSON, is too
	// large or does not match the input schema.
	ErrBadExample = errors.New("dag: bad example input")
)

// MaxInputSchemaBytes and MaxExampleInputBytes bound a workflow's input
// schema and example input (in their compact JSON form): both are stored
// with every version of its definition.
const (
	MaxInputSchemaBytes  = 64 << 10
	MaxExampleInputBytes = 64 << 10
)

// maxInputProblems is how many problems an *InputError lists.
const maxInputProblems = 5

// schemaURL names the input schema while it compiles; it is no file.
const schemaURL = "urn:dagflow:input-schema"

// ExampleInput declares an example of the workflow's input: v is any
// JSON-encodable value, or raw JSON as []byte or json.RawMessage (as
// Trigger takes an input). It is stored with the definition in a
// canonical form (compact, object keys sorted), so that a dashboard
// prefills its trigger form with it; with an [InputSchema], Build checks
// that it matches.
func ExampleInput(v any) WorkflowOption {
	return func(c *workflowConfig) { c.example, c.exampleSet = v, true }
}

// InputSchema declares the JSON Schema (draft 2020-12 unless it says
// otherwise with $schema) that every run's input must match: Trigger
// refuses an input that does not, before creating the run, with an error
// wrapping an *[InputError]. A run triggered without an input is checked
// as null. The schema must be self-contained (no $ref to another
// document); formats are annotations, not checked. Build compiles it: a
// schema that is not JSON or does not compile is an error wrapping
// [ErrBadSchema].
func InputSchema[S ~string | ~[]byte](schema S) WorkflowOption {
	b := []byte(schema)
	return func(c *workflowConfig) { c.schema, c.schemaSet = b, true }
}

// inputSpec is a built workflow's example and compiled schema.
type inputSpec struct {
	example  json.RawMessage // canonical JSON; nil for none
	schema   json.RawMessage // canonical JSON; nil for none
	compiled *jsonschema.Schema
}

// ExampleInput returns the workflow's example input ([ExampleInput]) as
// compact JSON, nil when it declares none.
func (w *Workflow) ExampleInput() json.RawMessage { return bytes.Clone(w.input.example) }

// InputSchema returns the workflow's input schema ([InputSchema]) as
// compact JSON, nil when it declares none.
func (w *Workflow) InputSchema() json.RawMessage { return bytes.Clone(w.input.schema) }

// CheckInput checks a run's input (JSON; nil or empty for no input,
// checked as null) against the workflow's input schema. It returns nil
// when the workflow has no schema or the input matches, an *[InputError]
// when it does not, and an error for an input that is not JSON.
func (w *Workflow) CheckInput(input json.RawMessage) error {
	if w.input.compiled == nil {
		return nil
	}
	return checkInput(w.name, w.input.compiled, input)
}

func checkInput(workflow string, sch *jsonschema.Schema, input json.RawMessage) error {
	var v any
	if len(bytes.TrimSpace(input)) > 0 {
		var err error
		if v, err = jsonschema.UnmarshalJSON(bytes.NewReader(input)); err != nil {
			return fmt.Errorf("dag: workflow %q: input is not JSON: %w", workflow, err)
		}
	}
	err := sch.Validate(v)
	var ve *jsonschema.ValidationError
	if errors.As(err, &ve) {
		return &InputError{Workflow: workflow, Problems: inputProblems(ve)}
	}
	if err != nil {
		return fmt.Errorf("dag: workflow %q: check the input: %w", workflow, err)
	}
	return nil
}

// InputError is an input that does not match the workflow's input
// schema. Its message names the workflow and the problems, like
//
//	dag: workflow "order": invalid input: at "/total": got string, want number
type InputError struct {
	Workflow string
	// Problems are the schema's complaints, at most five, the first
	// found first.
	Problems []InputProblem
}

// InputProblem is one way an input does not match its schema.
type InputProblem struct {
	// Pointer is the JSON pointer (RFC 6901) of the offending value, ""
	// for the whole input.
	Pointer string
	// Reason says what is wrong, like "got string, want number" or
	// "missing property 'total'".
	Reason string
}

// String returns `at "<pointer>": <reason>`, or the reason alone for the
// whole input.
func (p InputProblem) String() string {
	if p.Pointer == "" {
		return p.Reason
	}
	return "at " + strconv.Quote(p.Pointer) + ": " + p.Reason
}

// Detail returns the problems, separated by "; ".
func (e *InputError) Detail() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return strings.Join(parts, "; ")
}

// Error returns `dag: workflow "<name>": invalid input: <problems>`.
func (e *InputError) Error() string {
	return fmt.Sprintf("dag: workflow %q: invalid input: %s", e.Workflow, e.Detail())
}

var englishPrinter = message.NewPrinter(language.English)

// inputProblems flattens the validator's tree into its leaves, the
// precise complaints ("total is a string"), leaving out the summaries
// above them ("does not match the schema").
func inputProblems(ve *jsonschema.ValidationError) []InputProblem {
	var out []InputProblem
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(out) == maxInputProblems {
			return
		}
		if len(e.Causes) == 0 {
			out = append(out, InputProblem{Pointer: pointer(e.InstanceLocation), Reason: e.ErrorKind.LocalizedString(englishPrinter)})
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return out
}

// pointer writes a location as a JSON pointer.
func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(t))
	}
	return b.String()
}

// buildInput checks the declared example and schema; a problem is
// reported to v.
func buildInput(v *validator, c workflowConfig) inputSpec {
	var in inputSpec
	if c.schemaSet {
		schema, err := canonicalJSON(c.schema)
		switch {
		case err != nil:
			v.add("", ErrBadSchema, "input schema is not JSON: %v", err)
		case len(schema) > MaxInputSchemaBytes:
			v.add("", ErrBadSchema, "input schema is larger than %d bytes", MaxInputSchemaBytes)
		default:
			if in.compiled, err = compileSchema(schema); err != nil {
				v.add("", ErrBadSchema, "%v", err)
			} else {
				in.schema = schema
			}
		}
	}
	if c.exampleSet {
		ex, err := exampleJSON(c.example)
		switch {
		case err != nil:
			v.add("", ErrBadExample, "example input is not JSON: %v", err)
		case len(ex) > MaxExampleInputBytes:
			v.add("", ErrBadExample, "example input is larger than %d bytes", MaxExampleInputBytes)
		default:
			in.example = ex
			var ie *InputError
			if in.compiled != nil && errors.As(checkInput(v.workflow, in.compiled, ex), &ie) {
				v.add("", ErrBadExample, "example input does not match the input schema: %s", ie.Detail())
			}
		}
	}
	return in
}

// exampleJSON encodes an example as Trigger encodes an input, then
// canonically.
func exampleJSON(v any) (json.RawMessage, error) {
	var raw []byte
	switch x := v.(type) {
	case json.RawMessage:
		raw = x
	case []byte:
		raw = x
	default:
		var err error
		if raw, err = json.Marshal(v); err != nil {
			return nil, err
		}
	}
	return canonicalJSON(raw)
}

// canonicalJSON returns b compact, with object keys sorted and numbers
// as written, so that the same document declared in Go or in YAML is
// stored, and hashed, the same.
func canonicalJSON(b []byte) (json.RawMessage, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, errors.New("more than one JSON value")
	}
	return json.Marshal(v)
}

// compileSchema compiles a canonical schema, with no loading of other
// documents.
func compileSchema(schema json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, fmt.Errorf("input schema is not JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	sch, err := c.Compile(schemaURL)
	var (
		le *jsonschema.LoadURLError
		me *jsonschema.SchemaValidationError
		ve *jsonschema.ValidationError
	)
	switch {
	case errors.As(err, &le):
		return nil, fmt.Errorf("input schema refers to %q: an input schema must be self-contained", le.URL)
	case errors.As(err, &me) && errors.As(me.Err, &ve):
		// Not a schema by its metaschema: say where, on one line.
		return nil, fmt.Errorf("input schema does not compile: %s", (&InputError{Problems: inputProblems(ve)}).Detail())
	}
	if err != nil {
		return nil, fmt.Errorf("input schema does not compile: %s", strings.ReplaceAll(err.Error(), schemaURL, "schema"))
	}
	return sch, nil
}

// noLoader refuses every document but the schema itself: a $ref to a
// file or URL would read the node's disk or network at build time.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, errors.New("not loaded")
}

// inputOptions turns a stored definition's example and schema back into
// options.
func (d Definition) inputOptions() []WorkflowOption {
	var opts []WorkflowOption
	if d.ExampleInput != nil {
		opts = append(opts, ExampleInput(d.ExampleInput))
	}
	if d.InputSchema != nil {
		opts = append(opts, InputSchema(d.InputSchema))
	}
	return opts
}
