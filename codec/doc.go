// Package codec is the contract of a payload codec: what the engine calls
// to change a payload on its way into the store and back, so that run
// inputs, step outputs and error texts are not stored (or shown through
// the store) in clear. Set one in engine.Config.Codec.
//
// Two uses:
//
//   - Encryption at rest: package codec/aesgcm encrypts every payload with
//     AES-256-GCM under a key id, so keys can rotate, and hashes the
//     correlation values the store matches (Hasher).
//   - Redaction: a codec that drops or masks fields on Encode and returns
//     its input on Decode keeps the data out of the store for good
//     (handlers downstream then see the redacted payload too).
//
// It imports only the standard library, so a codec need not depend on the
// engine.
package codec
