package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/alecthomas/kong"

	"github.com/tock-sched/tock/node"
)

// tockd dev serves without keys, so it listens on loopback only.
func TestDevListensOnLoopbackOnly(t *testing.T) {
	for addr, ok := range map[string]bool{"127.0.0.1:8080": true, "[::1]:8080": true, "localhost:8080": true,
		"0.0.0.0:8080": false, ":8080": false, "10.0.0.5:8080": false, "example.com:8080": false} {
		if err := node.LoopbackOnly(addr); (err == nil) != ok {
			t.Errorf("loopbackOnly(%s) = %v", addr, err)
		}
	}
	d := &DevCmd{HTTPAddr: "0.0.0.0:0"}
	if err := d.Run(); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("tockd dev --http-addr 0.0.0.0:0: %v", err)
	}
}

// The deploy files run tockd with API keys required, and serve /metrics
// on a port of their own.
func TestDeployFilesRequireKeys(t *testing.T) {
	for _, f := range []string{"../../deploy/compose.yaml", "../../deploy/kubernetes/tockd.yaml"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if regexp.MustCompile(`(?i)auth[^\n]*none`).MatchString(s) {
			t.Errorf("%s turns authentication off", f)
		}
		if !regexp.MustCompile(`TOCK_AUTH(:|, value:) "?keys"?`).MatchString(s) || !strings.Contains(s, "keys create") {
			t.Errorf("%s does not require keys (TOCK_AUTH keys) or say how to create the first", f)
		}
		if !strings.Contains(s, "TOCK_METRICS_ADDR") {
			t.Errorf("%s does not serve /metrics on its own port", f)
		}
	}
}

// Half the JWT flags, or a JWK Set over plain http to another machine,
// stop tockd serve at start. (That serve with all of them accepts the
// identity provider's tokens is node's TestServeWithJWKS.)
func TestServeRefusesHalfJWTFlags(t *testing.T) {
	jwks := httptest.NewServer(http.NotFoundHandler())
	defer jwks.Close()

	for _, bad := range [][]string{
		{"--jwks-url", jwks.URL},
		{"--jwt-issuer", "https://idp.test"},
		{"--jwks-url", "http://idp.example.com/jwks.json", "--jwt-issuer", "https://idp.test", "--jwt-audience", "tock"},
	} {
		var c ServeCmd
		parser, err := kong.New(&c)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := parser.Parse(bad); err != nil {
			t.Fatal(err)
		}
		if _, err := c.config(); err == nil || !strings.Contains(err.Error(), "jwks") && !strings.Contains(err.Error(), "jwt") {
			t.Errorf("serve %v: %v", bad, err)
		}
	}

}
