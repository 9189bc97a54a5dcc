package console

import (
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// FragmentHeader is the request header the console's script sends when it
// polls a page: the answer is then only the page's <main> content, which
// the script swaps in.
const FragmentHeader = "X-Console-Fragment"

// DefaultPrefix is where the console expects to be mounted.
const DefaultPrefix = "/console"

// Config configures New.
type Config struct {
	// SchedulesURL and GPUURL are the base URLs of the Schedules and GPU
	// functions, e.g. http://127.0.0.1:8080/Schedules.
	SchedulesURL, GPUURL string
	// HTTP sends the API calls; nil means a client with a 30s timeout. A
	// client whose transport adds credentials (ID tokens) goes here.
	HTTP *http.Client
	// Token, when set, is sent as a bearer token on every API call.
	Token string
	// Prefix is the path the console is mounted at, without a trailing
	// slash; "" means /console. Links are built with it; the handler
	// itself expects the prefix already stripped (http.StripPrefix).
	Prefix string
	// LoopbackOnly refuses (421) a request whose Host is not a loopback
	// name or address, so a DNS-rebinding page cannot reach the console
	// and, through it, the operator's credentials.
	LoopbackOnly bool
	// Logger receives API failures; nil means slog.Default().
	Logger *slog.Logger
	// Clock is now; nil means time.Now. The upcoming fire times are
	// computed from it.
	Clock func() time.Time
}

type server struct {
	cfg   Config
	sched *apiClient
	gpu   *apiClient
	pages map[string]*template.Template
}

// New returns the console's handler, to be mounted under cfg.Prefix with
// http.StripPrefix.
func New(cfg Config) (http.Handler, error) {
	if cfg.SchedulesURL == "" || cfg.GPUURL == "" {
		return nil, errors.New("console: SchedulesURL and GPUURL are required")
	}
	for _, u := range []string{cfg.SchedulesURL, cfg.GPUURL} {
		pu, err := url.Parse(u)
		if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			return nil, fmt.Errorf("console: %q is not an http(s) URL", u)
		}
	}
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{Timeout: 30 * time.Second}
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	cfg.Prefix = strings.TrimRight(cfg.Prefix, "/")
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	s := &server{
		cfg:   cfg,
		sched: &apiClient{base: strings.TrimRight(cfg.SchedulesURL, "/"), token: cfg.Token, http: cfg.HTTP},
		gpu:   &apiClient{base: strings.TrimRight(cfg.GPUURL, "/"), token: cfg.Token, http: cfg.HTTP},
	}
	if err := s.parse(); err != nil {
		return nil, err
	}
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, fmt.Errorf("console: static files: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", s.schedules)
	mux.HandleFunc("GET /schedules/{id}", s.scheduleDetail)
	mux.HandleFunc("GET /schedules/{id}/delete", s.deleteConfirm)
	mux.HandleFunc("POST /schedules/{id}/{action}", s.scheduleAction)
	mux.HandleFunc("GET /runs", s.runs)
	mux.HandleFunc("GET /runs/{id}", s.runDetail)
	mux.HandleFunc("GET /gpu", s.gpuPage)
	mux.HandleFunc("GET /gpu/jobs/{id}", s.gpuJob)
	mux.HandleFunc("GET /leases", s.leases)
	mux.HandleFunc("GET /calendars", s.calendars)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.render(w, r, http.StatusNotFound, "notfound", "Not found", "", nil)
	})
	var h http.Handler = mux
	// Go's cross-origin protection refuses a non-safe request whose
	// Sec-Fetch-Site or Origin says it comes from another site: a page
	// elsewhere cannot make the operator's browser pause or delete.
	h = http.NewCrossOriginProtection().Handler(h)
	h = securityHeaders(h)
	if cfg.LoopbackOnly {
		h = loopbackOnly(h)
	}
	return h, nil
}

// securityHeaders sets the headers every answer carries: a self-only CSP
// (no inline script or style, no framing), no MIME sniffing, no referrer
// leaking run ids to other sites.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		next.ServeHTTP(w, r)
	})
}

// loopbackOnly answers 421 to a Host that is not localhost or a loopback
// address: a rebinding attacker's name resolves to 127.0.0.1 but arrives
// with its own Host.
func loopbackOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !IsLoopbackHost(r.Host) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusMisdirectedRequest)
			_, _ = io.WriteString(w, "the console answers only on localhost or a loopback address (DNS rebinding protection)\n")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// IsLoopbackHost reports whether hostport (a Host header or a listen
// address, with or without a port) names the loopback interface:
// "localhost", a *.localhost name, or a loopback IP.
func IsLoopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
