package api

import (
	"fmt"
	"maps"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
)

// This file holds the checks every request passes before its handler:
// the Host it names, its media type, and the text of its query and path
// parameters. They keep browsers (other sites' pages, DNS rebinding) out
// and bad text away from Postgres, in one place for every endpoint.

// hostCheck refuses a request whose Host is not one of allowed (names in
// any port, or host:port; "*" is any), with 421: a page on another site
// can reach a server on loopback or a private network through a DNS name
// it controls (DNS rebinding), and then its Host is that name. Health
// checks are exempt, since probes address a node by its IP. Empty
// allowed: every Host.
func hostCheck(allowed []string) echo.MiddlewareFunc {
	names := map[string]bool{}
	for _, a := range allowed {
		if a == "*" {
			return nil
		}
		names[normalHost(a)] = true
	}
	if len(names) == 0 {
		return nil
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" {
				return next(c)
			}
			host := normalHost(r.Host)
			name, _, err := net.SplitHostPort(host)
			if err != nil {
				name = host
			}
			if !names[host] && !names[normalHost(name)] {
				p := newProblem(http.StatusMisdirectedRequest, ProblemMisdirected, "Misdirected request",
					fmt.Sprintf("This server does not answer for host %q (tockd --allowed-hosts).", strings.ToValidUTF8(r.Host, "\uFFFD")))
				return withField(p, "Host", "is not a host this server answers for")
			}
			return next(c)
		}
	}
}

// normalHost is h lower-cased, without the brackets of a bare IPv6
// address ([::1] is ::1; [::1]:8080 stays as it is, for SplitHostPort).
func normalHost(h string) string {
	h = strings.ToLower(strings.TrimSpace(h))
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	return h
}

// cors answers browsers' cross-origin requests from origins (see
// Config.CORSOrigins), or is nil when there are none: then no response
// carries a CORS header, and browsers keep other sites' pages from
// reading answers or sending JSON.
func cors(origins []string) echo.MiddlewareFunc {
	if len(origins) == 0 {
		return nil
	}
	return middleware.CORSWithConfig(middleware.CORSConfig{
		AllowOrigins: origins,
		AllowMethods: []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete},
		AllowHeaders: []string{echo.HeaderContentType, echo.HeaderAccept, echo.HeaderAuthorization},
		// Location names what a POST created.
		ExposeHeaders: []string{echo.HeaderLocation},
		MaxAge:        600,
	})
}

// checkOrigins rejects a CORS origin that is no origin a browser sends.
func checkOrigins(origins []string) error {
	for _, o := range origins {
		if o == "*" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
			return fmt.Errorf("api: CORS origin %q is not an origin such as https://console.example.com", o)
		}
	}
	return nil
}

// requireJSON refuses, with 415, a request with a body that is not JSON
// (application/json, or application/<anything>+json, in UTF-8). HTML
// forms and scripts of other sites can send text/plain and form bodies
// without asking the server first (no CORS preflight); JSON they cannot.
func requireJSON(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
			return next(c)
		}
		mt, params, err := mime.ParseMediaType(r.Header.Get(echo.HeaderContentType))
		json := err == nil && (mt == echo.MIMEApplicationJSON ||
			strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
		if cs, ok := params["charset"]; json && ok && !strings.EqualFold(cs, "utf-8") {
			json = false
		}
		if !json {
			p := newProblem(http.StatusUnsupportedMediaType, ProblemUnsupportedMedia, "Unsupported media type",
				"Send the body as application/json.")
			return withField(p, echo.HeaderContentType, "must be application/json")
		}
		return next(c)
	}
}

// checkParams refuses, with 400 naming the parameter, a query or path
// parameter that holds U+0000 or is not UTF-8 (a %00 or %FF in the URL):
// Postgres stores neither in text, and would answer with an error.
func checkParams(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		var errs fieldErrors
		check := func(field, v string) {
			switch {
			case !utf8.ValidString(v):
				errs.add(field, "must be valid UTF-8")
			case strings.ContainsRune(v, 0):
				errs.add(field, "must not contain the character U+0000 (%%00)")
			}
		}
		for _, name := range c.ParamNames() {
			v := c.Param(name)
			if u, err := url.PathUnescape(v); err == nil {
				v = u
			}
			check(name, v)
		}
		q := c.QueryParams()
		for _, k := range slices.Sorted(maps.Keys(q)) {
			if !utf8.ValidString(k) || strings.ContainsRune(k, 0) {
				errs.add("query", "has a parameter name that is not UTF-8 text without U+0000")
				continue
			}
			field := k
			if field == "" { // "?=%00": a value without a name
				field = "query"
			}
			for _, v := range q[k] {
				check(field, v)
			}
		}
		if err := errs.err(); err != nil {
			return err
		}
		return next(c)
	}
}
