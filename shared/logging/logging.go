package logging

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"
)

// The formats New and NewFormat write. JSON is what Cloud Logging parses;
// text is for a person at a terminal.
const (
	FormatJSON = "json"
	FormatText = "text"
)

// New returns a JSON logger writing Cloud Logging field names to w. level is
// debug, info, warn or error; anything else means info.
func New(w io.Writer, level string) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{
		Level:       ParseLevel(level),
		ReplaceAttr: replace,
	}))
}

// NewFormat returns a logger writing to w in format: FormatJSON (as New),
// or FormatText, slog's key=value lines with a short local time and the
// same severity names (WARNING, not WARN), so a warning reads the same in
// a terminal and in Cloud Logging. Any other format is an error, so a typo
// is not silently a JSON logger.
func NewFormat(w io.Writer, format, level string) (*slog.Logger, error) {
	switch format {
	case FormatJSON:
		return New(w, level), nil
	case FormatText:
		return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{
			Level:       ParseLevel(level),
			ReplaceAttr: replaceText,
		})), nil
	}
	return nil, fmt.Errorf("logging: format %q: want %s or %s", format, FormatJSON, FormatText)
}

// ParseLevel maps a level name to a slog.Level, defaulting to info.
func ParseLevel(s string) slog.Level {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "debug":
		return slog.LevelDebug
	case "warn", "warning":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

func replace(groups []string, a slog.Attr) slog.Attr {
	if len(groups) > 0 {
		return a
	}
	switch a.Key {
	case slog.LevelKey:
		lvl, _ := a.Value.Any().(slog.Level)
		return slog.String("severity", severity(lvl))
	case slog.MessageKey:
		return slog.String("message", a.Value.String())
	case slog.TimeKey:
		return slog.Attr{Key: "time", Value: a.Value}
	}
	return a
}

// replaceText keeps slog's text keys (time, level, msg), which read well
// in a terminal, but with the time of day only and Cloud Logging's
// severity names.
func replaceText(groups []string, a slog.Attr) slog.Attr {
	if len(groups) > 0 {
		return a
	}
	switch a.Key {
	case slog.LevelKey:
		lvl, _ := a.Value.Any().(slog.Level)
		return slog.String(slog.LevelKey, severity(lvl))
	case slog.TimeKey:
		if t, ok := a.Value.Any().(time.Time); ok {
			return slog.String(slog.TimeKey, t.Format("15:04:05.000"))
		}
	}
	return a
}

func severity(l slog.Level) string {
	switch {
	case l >= slog.LevelError:
		return "ERROR"
	case l >= slog.LevelWarn:
		return "WARNING"
	case l >= slog.LevelInfo:
		return "INFO"
	default:
		return "DEBUG"
	}
}
