// Package logging sets up log/slog to write JSON that Cloud Logging
// understands: the level is "severity" (DEBUG, INFO, WARNING, ERROR) and the
// text is "message", so logs from functions and Cloud Run are parsed into
// structured entries with no agent configuration. NewFormat also offers a
// text format, slog's key=value lines with the same severity names, for a
// person reading a terminal (the CLI's --log-format).
package logging
