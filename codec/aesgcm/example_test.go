package aesgcm_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"

	"github.com/dagflow/dagflow/codec"
	"github.com/dagflow/dagflow/codec/aesgcm"
)

// An AES-GCM codec encrypts with the current key ("2025-06") and still
// decrypts what the previous key ("2025-01") encrypted. Load the keys from
// a secret store or a file, not from code; set the codec as
// engine.Config.Codec on every node.
func Example() {
	oldKey, newKey := make([]byte, aesgcm.KeySize), make([]byte, aesgcm.KeySize)
	rand.Read(oldKey)
	rand.Read(newKey)
	ctx := context.Background()

	before, _ := aesgcm.New("2025-01", map[string][]byte{"2025-01": oldKey})
	stored, _ := before.Encode(ctx, codec.Input, []byte(`{"card":"4111 1111 1111 1111"}`))

	c, err := aesgcm.New("2025-06", map[string][]byte{"2025-01": oldKey, "2025-06": newKey})
	if err != nil {
		panic(err)
	}
	plain, err := c.Decode(ctx, codec.Input, stored)
	fmt.Println(string(plain), err)

	again, _ := c.Encode(ctx, codec.Input, plain)
	fmt.Println(strings.HasPrefix(string(again), `"dagflow-aesgcm:v1:2025-06:`))
	// Output:
	// {"card":"4111 1111 1111 1111"} <nil>
	// true
}
