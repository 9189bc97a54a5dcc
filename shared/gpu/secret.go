package gpu

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
)

// SecretHeader carries a dispatch's secret on :heartbeat and :complete. A
// header rather than a body field: bodies (a completion carries stdout)
// are what gets logged, dumped or echoed back when debugging, and headers
// other than a few well-known ones are not; it also sits where a proxy
// already expects credentials, next to Authorization.
const SecretHeader = "Baton-Dispatch-Secret"

// newSecret draws the secret for one dispatch: 32 bytes from crypto/rand,
// base64url. Only its hash is stored, so a reader of the database (or of
// a backup) cannot act as the worker.
func newSecret() (secret, hash string) {
	// crypto/rand.Read never fails (it crashes the program instead), so
	// there is no error to handle.
	var b [32]byte
	_, _ = rand.Read(b[:])
	secret = base64.RawURLEncoding.EncodeToString(b[:])
	return secret, hashSecret(secret)
}

// hashSecret is what the job and slot documents store for secret. A plain
// SHA-256 suffices: the secret has 256 random bits, so there is nothing
// for a slow hash to protect against guessing. The empty secret (an older
// worker sends none) hashes to a value no dispatch stores.
func hashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// secretMatches reports whether secret is the one whose hash was stored,
// in constant time, so the time taken says nothing about how much of it
// was right. A document without a hash (dispatched before secrets
// existed) matches nothing.
func secretMatches(hash, secret string) bool {
	if hash == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(hash), []byte(hashSecret(secret))) == 1
}
