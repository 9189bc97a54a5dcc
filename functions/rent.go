package functions

import (
	"net/http"
	"net/url"

	"github.com/baton-cron/baton/shared/config"
	"github.com/baton-cron/baton/shared/httpapi"
	"github.com/baton-cron/baton/shared/rent"
)

// rentBodyLimit bounds a Rent POST body: five numbers fit in far less.
const rentBodyLimit = 4 << 10

func init() {
	register(config.FnRent, func(*Deps) (http.Handler, error) { return http.HandlerFunc(serveRent), nil })
}

// serveRent is the public jeonse ↔ monthly rent calculator (no auth): GET
// with query parameters or POST with the same fields as JSON. The
// arithmetic and validation live in shared/rent.
func serveRent(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "" && r.URL.Path != "/" {
		httpapi.WriteError(w, r, httpapi.NotFound("no such path %q under /%s", r.URL.Path, config.FnRent))
		return
	}
	var in rent.Input
	var err error
	switch r.Method {
	case http.MethodGet:
		var q url.Values
		if q, err = url.ParseQuery(r.URL.RawQuery); err != nil {
			err = httpapi.BadRequest("query", "malformed query string: %v", err)
		} else {
			in, err = rent.FromQuery(q)
		}
	case http.MethodPost:
		err = httpapi.DecodeJSON(w, r, rentBodyLimit, &in)
	default:
		w.Header().Set("Allow", "GET, POST")
		err = httpapi.MethodNotAllowed(r.Method)
	}
	var res rent.Result
	if err == nil {
		var req rent.Request
		if req, err = in.Parse(); err == nil {
			res, err = rent.Calculate(req)
		}
	}
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, res)
}
