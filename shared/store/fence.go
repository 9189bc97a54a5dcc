package store

// DefaultFenceField is the document field that records the last fencing
// token (lease epoch) that wrote the document.
const DefaultFenceField = "fence"

// Fence is a fencing token: the epoch of the lease under which a write is
// made, and the document field that records it.
type Fence struct {
	// Field is the document field; empty means DefaultFenceField.
	Field string
	// Epoch is the lease epoch; it only goes up.
	Epoch int64
}
