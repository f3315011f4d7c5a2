package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/dagflow/dagflow/codec"
	"github.com/dagflow/dagflow/internal/jsoncheck"
	"github.com/dagflow/dagflow/persistence"
)

// The payload codec at the engine's boundary (Config.Codec): inputs,
// outputs and error texts are encoded before they are written to the
// store and decoded where the engine reads them (claims, when conditions,
// Get, Runs, Wait, DeadLetters, schedules). Correlation values are
// hashed, when the codec hashes (storedCorrelation). Without a codec
// every function here returns its argument.

// maxEncodedErrorText is how much of an error text is given to the codec:
// an encrypted and base64-encoded 32 KiB fits the store's 64 KiB column,
// which would otherwise cut the envelope and make it undecodable.
const maxEncodedErrorText = 32 << 10

// encodePayload encodes an input or output; an empty one is left empty.
func (e *Engine) encodePayload(ctx context.Context, kind codec.Kind, b []byte) ([]byte, error) {
	if e.cfg.Codec == nil || len(b) == 0 {
		return b, nil
	}
	out, err := e.cfg.Codec.Encode(ctx, kind, b)
	if err != nil {
		return nil, fmt.Errorf("encoding the %s: %w", kind, err)
	}
	if jerr := jsoncheck.Check(out); jerr != nil {
		return nil, fmt.Errorf("encoding the %s: the codec returned a payload that is %w", kind, jerr)
	}
	return out, nil
}

// decodePayload decodes an input or output read from the store.
func (e *Engine) decodePayload(ctx context.Context, kind codec.Kind, b []byte) ([]byte, error) {
	if e.cfg.Codec == nil || len(b) == 0 {
		return b, nil
	}
	out, err := e.cfg.Codec.Decode(ctx, kind, b)
	if err != nil {
		return nil, fmt.Errorf("decoding the %s: %w", kind, err)
	}
	return out, nil
}

// encodeError encodes an error text for the store. A codec that fails
// must not lose the failure being recorded: the text is then replaced by
// one that says why, never stored in clear. Like the store write it is
// for, it is not cut short when ctx ends (Stop).
func (e *Engine) encodeError(ctx context.Context, text string) string {
	if e.cfg.Codec == nil || text == "" {
		return text
	}
	ctx = context.WithoutCancel(ctx)
	if len(text) > maxEncodedErrorText {
		cut := maxEncodedErrorText
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut]
	}
	out, err := e.cfg.Codec.Encode(ctx, codec.Error, []byte(text))
	if err == nil && !utf8.Valid(out) {
		err = errors.New("the codec returned text that is not valid UTF-8")
	}
	if err != nil {
		e.stats.errors.Add(1)
		e.log.Error("encoding an error text failed; it is stored as this message", "err", err)
		return fmt.Sprintf("(error text not stored: encoding it failed: %v)", err)
	}
	return string(out)
}

// decodeError decodes an error text read from the store.
func (e *Engine) decodeError(ctx context.Context, text string) (string, error) {
	if e.cfg.Codec == nil || text == "" {
		return text, nil
	}
	out, err := e.cfg.Codec.Decode(ctx, codec.Error, []byte(text))
	if err != nil {
		return "", fmt.Errorf("decoding the error: %w", err)
	}
	return string(out), nil
}

// decodeRun decodes a run's input, output and error in place.
func (e *Engine) decodeRun(ctx context.Context, r *persistence.Run) error {
	if e.cfg.Codec == nil {
		return nil
	}
	var err error
	if r.Input, err = e.decodePayload(ctx, codec.Input, r.Input); err != nil {
		return fmt.Errorf("engine: run %s: %w", r.ID, err)
	}
	if r.Output, err = e.decodePayload(ctx, codec.Output, r.Output); err != nil {
		return fmt.Errorf("engine: run %s: %w", r.ID, err)
	}
	if r.Error, err = e.decodeError(ctx, r.Error); err != nil {
		return fmt.Errorf("engine: run %s: %w", r.ID, err)
	}
	return nil
}

// decodeSteps decodes the outputs and errors of steps in place.
func (e *Engine) decodeSteps(ctx context.Context, sts []persistence.StepRun) error {
	if e.cfg.Codec == nil {
		return nil
	}
	for i := range sts {
		s := &sts[i]
		var err error
		if s.Output, err = e.decodePayload(ctx, codec.Output, s.Output); err != nil {
			return fmt.Errorf("engine: run %s step %q: %w", s.RunID, s.Step, err)
		}
		if s.Error, err = e.decodeError(ctx, s.Error); err != nil {
			return fmt.Errorf("engine: run %s step %q: %w", s.RunID, s.Step, err)
		}
	}
	return nil
}

// decodeClaim returns a claim with its run's input and the outputs it
// carries decoded: what the handler and the step's when condition see.
func (e *Engine) decodeClaim(ctx context.Context, res persistence.StepClaimResult) (persistence.StepClaimResult, error) {
	if e.cfg.Codec == nil {
		return res, nil
	}
	var err error
	if res.Run.Input, err = e.decodePayload(ctx, codec.Input, res.Run.Input); err != nil {
		return res, fmt.Errorf("engine: run %s: %w", res.Run.ID, err)
	}
	outs := make(map[string][]byte, len(res.Outputs))
	for step, b := range res.Outputs {
		if outs[step], err = e.decodePayload(ctx, codec.Output, b); err != nil {
			return res, fmt.Errorf("engine: run %s: step %q: %w", res.Run.ID, step, err)
		}
	}
	res.Outputs = outs
	return res, nil
}

// sameInputRun settles an idempotency conflict that a codec may have
// made: the store compares stored bytes, and an encrypting codec encodes
// the same input differently each time. It returns the existing run's id
// when the stored input and the repeat's decode to the same bytes (the
// comparison the store makes without a codec).
func (e *Engine) sameInputRun(ctx context.Context, err error, p persistence.RunCreateParams) (string, bool) {
	var ce *persistence.IdempotencyConflictError
	if e.cfg.Codec == nil || !errors.As(err, &ce) {
		return "", false
	}
	existing, gerr := e.store.RunGet(ctx, ce.RunID)
	if gerr != nil {
		return "", false
	}
	stored, derr := e.decodePayload(ctx, codec.Input, existing.Input)
	if derr != nil {
		return "", false
	}
	repeat, derr := e.decodePayload(ctx, codec.Input, p.Input)
	if derr != nil || !bytes.Equal(stored, repeat) {
		return "", false
	}
	return existing.ID, true
}

// encodedTooLarge adds to a store's refusal of an encoded payload over
// its size limit how large the payload was before the codec, which made
// it larger (an encrypting codec: by a third): the limit is on what is
// stored.
func (e *Engine) encodedTooLarge(err error, kind codec.Kind, plain, stored int) error {
	if e.cfg.Codec == nil || !errors.Is(err, persistence.ErrTooLarge) || plain == stored {
		return err
	}
	return fmt.Errorf("%w (the codec encoded the %s's %d bytes as %d; the store's limit applies to what it stores)", err, kind, plain, stored)
}

// maxCorrelationLen is the store's limit on a correlation value, in
// characters, checked here when the store sees only its hash.
const maxCorrelationLen = 255

// storedCorrelation returns what the store keeps of a correlation value
// and the other forms a stored row may have. With a codec that hashes
// (codec.Hasher) that is the value's keyed hash under the current key,
// and its hashes under the older keys (aliases, matched and never
// stored); otherwise the value itself. A value the store would refuse is
// refused here too (ErrInvalid), as the store cannot see it.
func (e *Engine) storedCorrelation(ctx context.Context, v string) (string, []string, error) {
	h, ok := e.cfg.Codec.(codec.Hasher)
	if !ok || v == "" {
		return v, nil, nil
	}
	if !utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0 || utf8.RuneCountInString(v) > maxCorrelationLen {
		shown := v
		if len(shown) > 80 {
			shown = shown[:80] + "..."
		}
		return "", nil, &persistence.ValidationError{Field: "correlation", Value: shown,
			Reason: fmt.Sprintf("must be valid UTF-8 without NUL, at most %d characters", maxCorrelationLen)}
	}
	hs, err := h.Hash(ctx, codec.Correlation, []byte(v))
	if err == nil && len(hs) == 0 {
		err = errors.New("the codec returned no hash")
	}
	if err != nil {
		return "", nil, fmt.Errorf("hashing the correlation: %w", err)
	}
	return hs[0], hs[1:], nil
}

// encodeSchedule encodes a schedule's input for the store.
func (e *Engine) encodeSchedule(ctx context.Context, sc *persistence.Schedule) error {
	var err error
	if sc.Input, err = e.encodePayload(ctx, codec.Input, sc.Input); err != nil {
		return fmt.Errorf("engine: schedule %q: %w", sc.Name, err)
	}
	return nil
}

// decodeSchedule decodes a schedule's input read from the store.
func (e *Engine) decodeSchedule(ctx context.Context, sc *persistence.Schedule) error {
	var err error
	if sc.Input, err = e.decodePayload(ctx, codec.Input, sc.Input); err != nil {
		return fmt.Errorf("engine: schedule %q: input: %w", sc.Name, err)
	}
	return nil
}
