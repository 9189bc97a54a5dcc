// Package logging sets up log/slog to write JSON that Cloud Logging
// understands: the level is "severity" (DEBUG, INFO, WARNING, ERROR) and the
// text is "message", so logs from functions and Cloud Run are parsed into
// structured entries with no agent configuration.
package logging
