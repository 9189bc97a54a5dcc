package console

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/baton-cron/baton/shared/schedule"
)

// pageNames are the templates under templates/, each rendered inside
// layout.html.
var pageNames = []string{"schedules", "schedule", "delete", "runs", "run", "gpu", "gpujob", "leases", "calendars", "error", "notfound"}

func (s *server) parse() error {
	funcs := template.FuncMap{
		"u":    func(path string) string { return s.cfg.Prefix + path },
		"pe":   url.PathEscape,
		"qe":   url.QueryEscape,
		"ts":   fmtTime,
		"ago":  func(t time.Time) string { return ago(s.cfg.Clock(), t) },
		"zone": zoneName,
		"derr": describe,
		// mul100 turns a fraction into a percentage (a tenant's target
		// share).
		"mul100": func(f float64) float64 { return 100 * f },
		// runOf is the run id of a job a gpu-target run enqueued (source
		// "run:<id>", shared/gpu's SourceRunPrefix), else "".
		"runOf": func(source string) string {
			if id, ok := strings.CutPrefix(source, "run:"); ok {
				return id
			}
			return ""
		},
		"deref": func(p *int) string {
			if p == nil {
				return "—"
			}
			return fmt.Sprint(*p)
		},
		"deref64": func(p *int64) string {
			if p == nil {
				return "—"
			}
			return fmt.Sprint(*p)
		},
		"tsp": func(p *time.Time) string {
			if p == nil {
				return "—"
			}
			return fmtTime(*p)
		},
	}
	s.pages = map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/partials.html", "templates/"+name+".html")
		if err != nil {
			return fmt.Errorf("console: parse template %s: %w", name, err)
		}
		s.pages[name] = t
	}
	return nil
}

// view is what every page's template gets.
type view struct {
	Title   string
	Nav     string
	Prefix  string
	Flash   *flash
	Updated time.Time
	D       any
}

// render writes page inside the layout, or only its <main> content when
// the console's script polls (FragmentHeader).
func (s *server) render(w http.ResponseWriter, r *http.Request, status int, page, title, nav string, data any) {
	v := view{Title: title, Nav: nav, Prefix: s.cfg.Prefix, Flash: takeFlash(w, r, s.cfg.Prefix), Updated: s.cfg.Clock(), D: data}
	name := "layout.html"
	if r.Header.Get(FragmentHeader) == "1" {
		name = "main"
	}
	var buf bytes.Buffer
	if err := s.pages[page].ExecuteTemplate(&buf, name, v); err != nil {
		s.cfg.Logger.Error("console: render", "page", page, "err", err)
		http.Error(w, "console: render "+page+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Vary", FragmentHeader)
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// link is a console URL: the prefix, path and query.
func (s *server) link(path string, q url.Values) string {
	u := s.cfg.Prefix + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

// flash is the message a POST leaves for the page it redirects to.
type flash struct {
	Kind string `json:"k"` // ok or error
	Text string `json:"t"`
}

const flashCookie = "baton_console_flash"

func setFlash(w http.ResponseWriter, prefix string, f flash) {
	b, _ := json.Marshal(f)
	// Not Secure: the console is served over plain HTTP on loopback.
	http.SetCookie(w, &http.Cookie{ //nolint:gosec // see above
		Name: flashCookie, Value: base64.RawURLEncoding.EncodeToString(b), Path: prefix + "/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode, MaxAge: 60,
	})
}

// takeFlash reads the flash cookie and clears it, so the message shows
// once. A poll (fragment) leaves it for the full page.
func takeFlash(w http.ResponseWriter, r *http.Request, prefix string) *flash {
	c, err := r.Cookie(flashCookie)
	if err != nil || r.Header.Get(FragmentHeader) == "1" {
		return nil
	}
	http.SetCookie(w, &http.Cookie{Name: flashCookie, Path: prefix + "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode}) //nolint:gosec // plain HTTP on loopback, as in setFlash
	b, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil {
		return nil
	}
	var f flash
	if json.Unmarshal(b, &f) != nil || f.Text == "" {
		return nil
	}
	if f.Kind != "ok" {
		f.Kind = "error"
	}
	return &f
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// ago is t relative to now, coarsely ("3m ago", "in 20s").
func ago(now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := now.Sub(t)
	if d < 0 {
		return "in " + coarse(-d)
	}
	return coarse(d) + " ago"
}

func coarse(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// spark is a sparkline of recent outcomes: one bar per run, oldest left,
// and a text alternative that counts them, since colour alone says
// nothing to a screen reader or a colour-blind reader.
type spark struct {
	Bars  []sparkBar
	Width int
	Label string
}

// sparkBar is one run's bar.
type sparkBar struct {
	X, Y, H int
	Class   string
	Title   string
}

func sparkline(runs []schedule.Run) spark {
	const barW, gap, height = 6, 2, 20
	sp := spark{Width: len(runs) * (barW + gap)}
	counts := map[schedule.RunStatus]int{}
	for i := len(runs) - 1; i >= 0; i-- {
		r := runs[i]
		counts[r.Status]++
		h := map[schedule.RunStatus]int{schedule.RunSucceeded: 20, schedule.RunFailed: 20, schedule.RunRunning: 14, schedule.RunPending: 8, schedule.RunSkipped: 6}[r.Status]
		if h == 0 {
			h = 4
		}
		x := (len(runs) - 1 - i) * (barW + gap)
		sp.Bars = append(sp.Bars, sparkBar{X: x, Y: height - h, H: h, Class: "s-" + string(r.Status), Title: r.FireTime.UTC().Format(time.RFC3339) + " " + string(r.Status)})
	}
	if len(runs) == 0 {
		sp.Label = "no runs yet"
		return sp
	}
	sp.Label = fmt.Sprintf("last %d runs:", len(runs))
	if len(runs) == 1 {
		sp.Label = "last run:"
	}
	for _, st := range schedule.AllRunStatuses() {
		if n := counts[st]; n > 0 {
			sp.Label += fmt.Sprintf(" %d %s", n, st)
		}
	}
	return sp
}
