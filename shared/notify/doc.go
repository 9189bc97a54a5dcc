// Package notify is the wire format of baton's notifications: the JSON
// payload of an event, the headers, and the HMAC-SHA256 signature that lets
// a receiver check that baton sent it.
//
// # Signature
//
// The signature is X-Baton-Signature: v1=<hex HMAC-SHA256(secret,
// timestamp + "." + body)>, where timestamp is X-Baton-Timestamp (unix
// seconds) and body the request body as sent. Signing the timestamp with
// the body lets a receiver refuse a replay of an old request (Verify's
// tolerance); the "v1=" prefix leaves room for another scheme later.
//
// # Delivery
//
// Delivery is at least once: a receiver may see one event twice (after a
// lost answer, or two deliverers racing), always with the same
// X-Baton-Idempotency-Key (<run id>:<event>), and should drop the second.
// Verify is small on purpose, so that a receiver can copy it rather than
// import baton.
package notify
