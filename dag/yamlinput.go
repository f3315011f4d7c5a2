package dag

import (
	"encoding/json"
	"errors"
	"fmt"

	"go.yaml.in/yaml/v3"
)

// The YAML keys example_input and input_schema: YAML values (JSON is
// YAML too) turned into JSON for ExampleInput and InputSchema.

// inputKeys are the workflow keys read by inputOption.
var inputKeys = []string{"example_input", "input_schema"}

// inputOption reads example_input or input_schema, remembering its node
// so that a build error points at it.
func (l *loader) inputOption(key string, v *yaml.Node) WorkflowOption {
	if l.inputNodes == nil {
		l.inputNodes = make(map[string]*yaml.Node, len(inputKeys))
	}
	l.inputNodes[key] = v
	var doc any
	if err := v.Decode(&doc); err != nil {
		l.Fail(v, key, err)
		return nil
	}
	b, err := json.Marshal(doc)
	if err != nil {
		l.Fail(v, key, fmt.Errorf("not a JSON value: %v", err))
		return nil
	}
	if key == "example_input" {
		return ExampleInput(json.RawMessage(b))
	}
	return InputSchema(b)
}

// locateInput points a build error about the example or the schema at
// its key; false for another error.
func (l *loader) locateInput(ve *DefinitionError) bool {
	key := ""
	switch {
	case errors.Is(ve, ErrBadExample):
		key = "example_input"
	case errors.Is(ve, ErrBadSchema):
		key = "input_schema"
	}
	n := l.inputNodes[key]
	if n == nil {
		return false
	}
	l.Fail(n, key, ve)
	return true
}
