package fence

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/baton-cron/baton/shared/errcode"
	"github.com/baton-cron/baton/shared/httpapi"
)

// Header is the request header that carries the token.
const Header = "X-Baton-Fence"

// ErrStale is returned for a token below the highest one seen for its
// lease: its holder lost the lease and a newer holder has already called.
// Its errcode.Code is StaleFence.
var ErrStale = errcode.New(errcode.StaleFence, "fence: stale token: a newer lease holder has already called")

// ErrMalformed is returned for a header that is not <lease>:<epoch>. Its
// errcode.Code is InvalidArgument.
var ErrMalformed = errcode.New(errcode.InvalidArgument, "fence: malformed token")

// Token is one fencing token: a lease name and its epoch.
type Token struct {
	Lease string
	Epoch int64
}

// String formats the token as the header carries it.
func (t Token) String() string { return t.Lease + ":" + strconv.FormatInt(t.Epoch, 10) }

// Parse reads a header value. The lease name may hold ':' (the epoch is
// after the last one); the epoch is a positive integer.
func Parse(v string) (Token, error) {
	i := strings.LastIndexByte(v, ':')
	if i <= 0 || i == len(v)-1 {
		return Token{}, fmt.Errorf("%w: %q, want <lease>:<epoch>", ErrMalformed, v)
	}
	epoch, err := strconv.ParseInt(v[i+1:], 10, 64)
	if err != nil || epoch < 1 {
		return Token{}, fmt.Errorf("%w: %q: the epoch must be a positive integer", ErrMalformed, v)
	}
	return Token{Lease: v[:i], Epoch: epoch}, nil
}

// Checker keeps the highest epoch seen per lease, in memory. The zero value
// is ready; it is safe for concurrent use.
type Checker struct {
	mu   sync.Mutex
	seen map[string]int64
}

// Check accepts t if its epoch is at least the highest seen for its lease
// (the same holder may call more than once), and records it. A lower epoch
// gets ErrStale and changes nothing.
func (c *Checker) Check(t Token) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[string]int64{}
	}
	if hi := c.seen[t.Lease]; t.Epoch < hi {
		return fmt.Errorf("%w: %s, but epoch %d has called", ErrStale, t, hi)
	}
	c.seen[t.Lease] = t.Epoch
	return nil
}

// Middleware refuses, with 409 Conflict, a request whose X-Baton-Fence is
// stale, and with 400 one whose header is malformed, in baton's one JSON
// error shape (shared/httpapi), naming the header as the field. A request without the
// header passes when optional is true (callers that are not baton, allow
// schedules) and gets 400 otherwise.
func Middleware(c *Checker, optional bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := r.Header.Get(Header)
		if v == "" {
			if optional {
				next.ServeHTTP(w, r)
				return
			}
			httpapi.WriteError(w, r, httpapi.BadRequest(Header, "is required"))
			return
		}
		t, err := Parse(v)
		if err != nil {
			httpapi.WriteError(w, r, httpapi.BadRequest(Header, "%s", err.Error()))
			return
		}
		if err := c.Check(t); err != nil {
			httpapi.WriteError(w, r, err) // StaleFence: 409
			return
		}
		next.ServeHTTP(w, r)
	})
}
