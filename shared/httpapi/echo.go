package httpapi

import (
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"unicode/utf8"
)

// MaxEcho is how many bytes of an input value an error message repeats. A
// caller that sent a 900 KB name needs to see which value was refused, not
// to receive it back whole: the error body would be as large as the attack.
const MaxEcho = 64

// MaxMessageBytes and MaxFieldBytes bound an error's Message and Field as
// WriteError sends them, whatever the code that built the error did, so an
// error body stays under 2 KB for any input.
const (
	MaxMessageBytes = 1024
	MaxFieldBytes   = 256
)

// Cut returns s, or its first MaxEcho bytes (on a rune boundary) and "…"
// when it is longer.
func Cut(s string) string { return cutTo(s, MaxEcho) }

func cutTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// Quote is strconv.Quote of Cut(s): the form an error message echoes an
// input value in.
func Quote(s string) string { return strconv.Quote(Cut(s)) }

// Sprintf is fmt.Sprintf, except that a string argument formatted with %q
// is cut to MaxEcho bytes first. %q is how baton's messages echo input
// ("unknown policy %q"), so every message built here (BadRequest and the
// other constructors use it) cuts what it echoes without each caller having
// to remember; %s and %v print a string whole, for text composed by the
// server such as a reason passed through.
func Sprintf(format string, args ...any) string {
	wrapped := make([]any, len(args))
	for i, a := range args {
		wrapped[i] = a
		if s, ok := a.(string); ok {
			wrapped[i] = echo(s)
			continue
		}
		// A named string type (an enum such as schedule.Overlap) holds
		// input just as a string does, so it is cut too, unless it
		// formats itself.
		if v := reflect.ValueOf(a); v.Kind() == reflect.String {
			switch a.(type) {
			case fmt.Formatter, fmt.Stringer, error:
			default:
				wrapped[i] = echo(v.String())
			}
		}
	}
	return fmt.Sprintf(format, wrapped...)
}

// echo is a string argument of Sprintf.
type echo string

// Format cuts the string for %q and prints it as it is for other verbs.
func (e echo) Format(f fmt.State, verb rune) {
	s := string(e)
	if verb == 'q' {
		s = Cut(s)
	}
	fmt.Fprintf(f, fmt.FormatString(f, verb), s)
}

// plainKey is a map key that reads unambiguously after a dot in a field
// path.
var plainKey = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// FieldPath names key inside path the way Error.Field does: "path.key" for
// a plain key (letters, digits, '-' and '_'), and path[<quoted key>], with
// the key cut by Quote, for any other (`target.builtin.args["$where"]`), so
// a key with a dot in it cannot pass for a nested field and a huge key does
// not make a huge field name.
func FieldPath(path, key string) string {
	if plainKey.MatchString(key) {
		if path == "" {
			return key
		}
		return path + "." + key
	}
	return path + "[" + Quote(key) + "]"
}
