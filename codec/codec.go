package codec

import "context"

// Kind says what a payload is, so that a codec may treat kinds apart (and
// an encrypting codec binds each ciphertext to its kind).
type Kind string

// The kinds of payload the engine encodes.
const (
	// Input is a run's input: JSON.
	Input Kind = "input"
	// Output is a step's output: JSON.
	Output Kind = "output"
	// Error is the text of a failed attempt, a dead step or a failed
	// run: UTF-8 text, not JSON. Texts the engine or the store writes on
	// their own ("cancelled", a lost worker) are not encoded.
	Error Kind = "error"
	// Correlation is an event's correlation value, or the value a step
	// waits for (dag.WaitFor): UTF-8 text. It is hashed (Hasher), never
	// encoded: the store matches it by equality.
	Correlation Kind = "correlation"
)

// Codec encodes payloads before the engine writes them to the store and
// decodes them where the engine reads them: handlers, `when` conditions
// and callers of the engine's API see decoded payloads; the store and
// anything reading it directly see encoded ones.
//
// Encode must return valid JSON for Input and Output (the store refuses
// anything else; an encrypting codec returns a JSON string) and valid
// UTF-8 text for Error. The engine does not call Encode for an empty
// payload (no input, no output), and it gives Encode at most 32 KiB of an
// error text, so that an encrypted text fits the store's error column.
//
// Decode is given what Encode returned, but also payloads written before
// the codec was configured and texts written without it: a codec should
// return a payload it did not encode as it is. A Decode error fails the
// step that needed the payload (it is retried like any failure), with the
// run's id in the error; the operator's reads (engine Get, Runs,
// DeadLetters, Events) show the record without that payload and say why
// (PayloadError). Engine.Start decodes a probe the store keeps, so a node
// whose codec cannot open the store's payloads does not start.
//
// Encode and Decode are called concurrently, on the engine's hot path.
type Codec interface {
	Encode(ctx context.Context, kind Kind, data []byte) ([]byte, error)
	Decode(ctx context.Context, kind Kind, data []byte) ([]byte, error)
}

// Hasher is implemented by a codec that also hashes the values the store
// matches by equality rather than reads back: the correlation values of
// events and of the steps waiting for them. The store then holds a keyed
// hash of each, not the value, and a wait still matches exactly its value.
// A codec without it leaves them in clear.
//
// Hash returns data's keyed hash under each of the codec's keys, the
// current key's first: the first is stored, and a stored value equal to
// any of them matches (so that values hashed under an older key match
// until it is dropped). A key gives equal data one hash and different
// data different hashes. Each is valid UTF-8, at most 128 bytes. Hash is
// called concurrently, on the engine's hot path.
type Hasher interface {
	Hash(ctx context.Context, kind Kind, data []byte) ([]string, error)
}

// Keyed is implemented by a codec that encodes under one of several keys
// (codec/aesgcm), so that payloads stored under an old key can be
// re-encoded under the current one and the old key retired
// (engine.RotateCodec, `dagflow codec rotate`).
type Keyed interface {
	Codec
	// CurrentKey is the id of the key Encode uses.
	CurrentKey() string
	// KeyOf returns the id of the key data was encoded under, and false
	// for data this codec did not encode (stored in clear). It does not
	// check that the key can open it.
	KeyOf(data []byte) (string, bool)
}
