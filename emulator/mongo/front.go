package mongo

import (
	"log/slog"
	"net/url"
)

// startFront puts the wire-protocol front ahead of FerretDB and returns the
// client-facing URI. PLACEHOLDER: until the front lands it returns the
// backend URI unchanged, so writes are NOT yet serialised.
func startFront(addr, backendURI string, logger *slog.Logger) (string, func() error, error) {
	u, err := url.Parse(backendURI)
	if err != nil {
		return "", nil, err
	}
	_ = addr
	_ = logger
	return "mongodb://" + u.Host + "/", func() error { return nil }, nil
}
