package main

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tock-sched/tock/api"
	"github.com/tock-sched/tock/auth"
	"github.com/tock-sched/tock/store/model"
	"github.com/tock-sched/tock/store/storetest"
)

// tockctl against an API that needs keys: --token sends one; keys
// create prints the new key alone, keys list shows it without its
// secret, whoami shows its grant and what it allows, keys delete makes
// it useless; without a token the error says
// what is missing.
func TestKeysCommands(t *testing.T) {
	t.Parallel()
	st := storetest.New(t, 16)
	srv, err := api.New(api.Config{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	k, _ := auth.NewKey()
	if _, err := st.CreateAPIKey(context.Background(), model.APIKey{ID: k.ID, SecretHash: k.Hash(), Namespace: "*", Role: "admin"}); err != nil {
		t.Fatal(err)
	}
	admin := k.String()

	tockctl(t, hs.URL, "jobs", "list").failed(t, 1, "This operation needs an API key")

	out := ok(t, hs.URL, "--token", admin, "keys", "create", "--namespace", "team-a", "--role", "reader", "--name", "ci", "--expires", "30d")
	if !regexp.MustCompile(`^tock_[0-9A-Za-z]{12}_[0-9A-Za-z]{32}\n$`).MatchString(out) {
		t.Fatalf("keys create printed %q", out)
	}
	reader := strings.TrimSpace(out)
	made, _ := auth.ParseKey(reader)

	list := ok(t, hs.URL, "--token", admin, "keys", "list")
	if !strings.Contains(list, made.ID) || !strings.Contains(list, "team-a") || !strings.Contains(list, "reader") ||
		strings.Contains(list, made.Secret) {
		t.Errorf("keys list:\n%s", list)
	}
	ok(t, hs.URL, "--token", reader, "jobs", "list")
	who := ok(t, hs.URL, "--token", reader, "whoami")
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^subject: key:` + made.ID + `$`),
		regexp.MustCompile(`(?m)^grant: +reader in namespace team-a$`),
		regexp.MustCompile(`(?m)^jobs\.list +team-a$`),
		regexp.MustCompile(`(?m)^jobs\.create +-$`),
	} {
		if !want.MatchString(who) {
			t.Errorf("whoami as a reader of team-a: no line matching %s in\n%s", want, who)
		}
	}
	tockctl(t, hs.URL, "--token", reader, "keys", "create", "--namespace", "team-a", "--role", "reader").
		failed(t, 1, "role reader in namespace team-a does not allow keys.create")

	ok(t, hs.URL, "--token", admin, "keys", "delete", made.ID)
	tockctl(t, hs.URL, "--token", reader, "jobs", "list").failed(t, 1, "unknown or was deleted")
}
