package api_test

import (
	"context"
	"strings"
	"testing"

	"github.com/dagflow/dagflow/engine"
)

// TestRetriedDeadLetterAnswerIsDecoded: the step a dead-letter retry
// answers with is read through the engine like every other answer, so
// with a Codec its error is the handler's text, never the stored
// ciphertext.
func TestRetriedDeadLetterAnswerIsDecoded(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		env := newAPIEnv(t, b, envOptions{engine: func(c *engine.Config) { c.Codec = keyring(t, "k1") }})
		id := triggerOrder(t, env, `{"fail":"charge"}`, "")
		// The step fails again at once, so an answer read late holds the
		// new failure's error: five rounds, each checked.
		for i := 0; i < 5; i++ {
			env.waitStatus(t, id, "failed")
			st, err := env.anon.RetryDeadLetter(context.Background(), id, "charge")
			if err != nil {
				t.Fatal(err)
			}
			if st.Error != "" && !strings.Contains(st.Error, "failed as asked") {
				t.Fatalf("round %d: the retried step's error is %q, not the handler's text", i, st.Error)
			}
			if st.PayloadError != "" {
				t.Fatalf("round %d: the retried step could not be decoded: %s", i, st.PayloadError)
			}
		}
	})
}
