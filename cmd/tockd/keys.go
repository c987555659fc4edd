package main

import (
	"fmt"
	"os"
	"time"

	"github.com/tock-sched/tock/auth"
	"github.com/tock-sched/tock/domain"
	"github.com/tock-sched/tock/jobs"
	"github.com/tock-sched/tock/store/model"
)

// KeysCmd manages API keys straight in the database: the first admin
// key, and any key when no admin key is at hand. Once there is one, the
// API (POST /v1/keys, tockctl keys) does the rest.
type KeysCmd struct {
	Create KeysCreateCmd `cmd:"" help:"Create an API key and print it (alone, on stdout); only its hash is stored."`
}

// KeysCreateCmd creates a key.
type KeysCreateCmd struct {
	Common
	Namespace string `name:"namespace" required:"" help:"The namespace the key's role holds in; '*' for every namespace (and the cluster's views)."`
	Role      string `name:"role" required:"" enum:"reader,operator,editor,admin" help:"reader, operator, editor or admin."`
	Expires   string `name:"expires" help:"How long the key is valid: days (90d) or a duration (12h); default: it never expires."`
	Name      string `name:"name" help:"What the key is for, shown in listings."`
}

// Run makes the key, stores its hash, prints the key on stdout and what
// it is on stderr.
func (c *KeysCreateCmd) Run() error {
	if c.Namespace != auth.AllNamespaces {
		if msg := jobs.NameProblem(c.Namespace); msg != "" {
			return fmt.Errorf("--namespace %q: %s (or '*' for every namespace)", c.Namespace, msg)
		}
	}
	role, err := auth.ParseRole(c.Role)
	if err != nil {
		return fmt.Errorf("--role: %w", err)
	}
	var expires *time.Time
	if c.Expires != "" {
		d, err := domain.ParseRetention(c.Expires)
		if err != nil {
			return fmt.Errorf("--expires: %w", err)
		}
		t := time.Now().Add(d).UTC().Truncate(time.Second)
		expires = &t
	}
	ctx, st, done, err := commandStore(c.PostgresURL, true)
	if err != nil {
		return err
	}
	defer done()
	k, err := auth.NewKey()
	if err != nil {
		return err
	}
	rec, err := st.CreateAPIKey(ctx, model.APIKey{ID: k.ID, SecretHash: k.Hash(), Namespace: c.Namespace, Role: role.String(),
		Name: c.Name, CreatedBy: "tockd keys create", ExpiresAt: expires})
	if err != nil {
		return err
	}
	fmt.Println(k.String())
	until := "never expires"
	if rec.ExpiresAt != nil {
		until = "expires " + rec.ExpiresAt.UTC().Format(time.RFC3339)
	}
	where := "namespace " + rec.Namespace
	if rec.Namespace == auth.AllNamespaces {
		where = "every namespace"
	}
	fmt.Fprintf(os.Stderr, "created key %s: role %s in %s, %s. It is shown only now: keep it (tockctl: export TOCK_TOKEN=...).\n",
		rec.ID, rec.Role, where, until)
	return nil
}
