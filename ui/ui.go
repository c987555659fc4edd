// Package ui serves tock's web dashboard: the files that ui/build.mjs builds
// from the TypeScript sources in ui/src into ui/dist, embedded in tockd so
// that running tock never needs Node. The dashboard is an API client: it
// holds no data and needs no authentication to load; every call it makes is
// authorised by the API like any other.
package ui

import (
	"bytes"
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed dist
var dist embed.FS

// Path is where the dashboard is served.
const Path = "/ui/"

// CSP is the dashboard's Content-Security-Policy: its own script, style and
// API only; no inline script or style, no frames, no form posts elsewhere.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Handler serves the dashboard under Path: its files, and index.html for
// every other path below it (the app's own pages, /ui/jobs?…), with CSP and
// the headers that keep it out of frames and its type from being sniffed.
func Handler() http.Handler {
	files, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	index, err := fs.ReadFile(files, "index.html")
	if err != nil {
		panic(err)
	}
	static := http.FileServer(http.FS(files))
	built := time.Now()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		name := strings.TrimPrefix(path.Clean(r.URL.Path), strings.TrimSuffix(Path, "/"))
		name = strings.TrimPrefix(name, "/")
		if name != "" && name != "index.html" {
			if f, err := files.Open(name); err == nil {
				_ = f.Close()
				// The file names carry no version: revalidate each time.
				h.Set("Cache-Control", "no-cache")
				r2 := r.Clone(r.Context())
				r2.URL.Path = "/" + name
				static.ServeHTTP(w, r2)
				return
			}
			if path.Ext(name) != "" {
				http.NotFound(w, r)
				return
			}
		}
		h.Set("Cache-Control", "no-cache")
		http.ServeContent(w, r, "index.html", built, bytes.NewReader(index))
	})
}
