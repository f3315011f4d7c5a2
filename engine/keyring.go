package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/dagflow/dagflow/codec"
	"github.com/dagflow/dagflow/persistence"
)

// The keyring check of Start. A node whose codec lacks the store's keys
// (or holds another key under the same id), or that has no codec at
// all, would fail every step it claims, dead-letter them, and write
// their errors under its own key (or in clear): the store keeps a
// probe, a short value the first node with a codec encodes, and Start
// refuses a node that cannot open it. RotateCodec re-encodes the probe
// with the rest.

// ErrKeyring is wrapped by Start's error when the node's codec does not
// match the store's payloads (errors.Is).
var ErrKeyring = errors.New("the node's payload codec does not match the store's")

// probePlain is what the probe encodes: a JSON string, as an input.
var probePlain = []byte(`"dagflow codec probe"`)

// checkKeyring opens the store's probe with the node's codec, and writes
// it when the store has none yet (a fresh store, or the first node with
// a codec on a store that had none).
func (e *Engine) checkKeyring(ctx context.Context) error {
	probe, err := e.store.CodecProbe(ctx, persistence.CodecProbeParams{})
	if err != nil {
		return fmt.Errorf("engine: reading the store's codec probe: %w", err)
	}
	if e.cfg.Codec == nil {
		if probe != nil {
			return fmt.Errorf("engine: %w: the store's payloads are encoded by a codec (it holds a codec probe) and this node has none: "+
				"set Config.Codec to the keyring the other nodes use", ErrKeyring)
		}
		return nil
	}
	if probe == nil {
		enc, err := e.cfg.Codec.Encode(ctx, codec.Input, probePlain)
		if err != nil {
			return fmt.Errorf("engine: encoding the codec probe: %w", err)
		}
		if probe, err = e.store.CodecProbe(ctx, persistence.CodecProbeParams{Create: enc}); err != nil {
			return fmt.Errorf("engine: storing the codec probe: %w", err)
		}
	}
	if _, err := e.cfg.Codec.Decode(ctx, codec.Input, probe); err != nil {
		return fmt.Errorf("engine: %w: this node's codec cannot open the store's codec probe (%v): "+
			"its keyring lacks the key the store's payloads are encoded with, or holds another key under that id; "+
			"give it the keyring the other nodes use (Config.Codec)", ErrKeyring, err)
	}
	if kc, ok := e.cfg.Codec.(codec.Keyed); ok {
		if id, sealed := kc.KeyOf(probe); sealed && id != kc.CurrentKey() {
			e.log.Info("the store's codec probe is under an older key than the current one; re-encode the store to retire it (dagflow codec rotate)",
				"probe_key", id, "current_key", kc.CurrentKey())
		}
	}
	return nil
}
