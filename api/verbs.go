package api

import (
	"net/http"
	"regexp"
	"strings"

	"github.com/labstack/echo/v4"
)

// Custom methods after a path parameter (POST /v1/applysets/{name}:plan,
// in the style of /v1/jobs:batch) are not something Echo can route: a
// parameter runs to the next slash, so ":name\:plan" and ":name\:apply"
// would be one route whose parameter is called "name\:plan". verbRouter
// registers them instead as one route, the path up to the parameter,
// whose handler splits the parameter at its last colon and runs the
// method's own handler (with its own middlewares) with the parameter
// set to what comes before.
type verbRouter struct {
	*echo.Echo
	// verbs maps each dispatching route (method and Echo path) to its
	// methods' handlers by verb.
	verbs map[string]map[string]echo.HandlerFunc
	// routes are the operations registered so, in the OpenAPI
	// document's form ("POST /v1/applysets/{name}:plan").
	routes []string
}

// verbRoute matches a route with a custom method after its last
// parameter: prefix, parameter, verb.
var verbRoute = regexp.MustCompile(`^(.*/):([A-Za-z0-9_]+)\\:([a-z]+)$`)

func newVerbRouter(e *echo.Echo) *verbRouter {
	return &verbRouter{Echo: e, verbs: map[string]map[string]echo.HandlerFunc{}}
}

// POST registers path, through the dispatch when it ends in a parameter
// and a custom method.
func (r *verbRouter) POST(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) *echo.Route {
	sub := verbRoute.FindStringSubmatch(path)
	if sub == nil {
		return r.Echo.POST(path, h, m...)
	}
	prefix, param, verb := sub[1], sub[2], sub[3]
	route := prefix + ":" + param
	for i := len(m) - 1; i >= 0; i-- {
		h = m[i](h)
	}
	r.routes = append(r.routes, http.MethodPost+" "+prefix+"{"+param+"}:"+verb)
	byVerb := r.verbs[route]
	if byVerb == nil {
		byVerb = map[string]echo.HandlerFunc{}
		r.verbs[route] = byVerb
		r.Echo.POST(route, func(c echo.Context) error {
			v := c.Param(param)
			i := strings.LastIndexByte(v, ':')
			if i < 0 || byVerb[v[i+1:]] == nil {
				return echo.ErrNotFound
			}
			c.SetParamNames(param)
			c.SetParamValues(v[:i])
			return byVerb[v[i+1:]](c)
		})
	}
	byVerb[verb] = h
	return nil
}
