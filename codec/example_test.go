package codec_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/dagflow/dagflow/codec"
)

// redact drops the named top-level fields of inputs before they are
// stored; nothing is encrypted, so Decode returns what it is given. The
// handlers downstream see the redacted input too: redact what no step
// needs after the first (or have that step keep it elsewhere).
type redact struct{ fields []string }

func (r redact) Encode(_ context.Context, kind codec.Kind, data []byte) ([]byte, error) {
	if kind != codec.Input {
		return data, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return data, nil // not an object: nothing to drop
	}
	for _, f := range r.fields {
		delete(m, f)
	}
	return json.Marshal(m)
}

func (redact) Decode(_ context.Context, _ codec.Kind, data []byte) ([]byte, error) {
	return data, nil
}

// A redacting codec keeps a card number out of the store for good. Set it
// as engine.Config.Codec.
func Example_redact() {
	var c codec.Codec = redact{fields: []string{"card"}}
	stored, _ := c.Encode(context.Background(), codec.Input, []byte(`{"order_id":"A-1","card":"4111 1111 1111 1111"}`))
	fmt.Println(string(stored))
	// Output: {"order_id":"A-1"}
}
