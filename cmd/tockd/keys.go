package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/tock-sched/tock/auth"
	"github.com/tock-sched/tock/node"
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
	ctx, st, done, err := commandStore(c.PostgresURL, true)
	if err != nil {
		return err
	}
	defer done()
	key, rec, err := node.CreateKey(ctx, st, node.KeySpec{Namespace: c.Namespace, Role: c.Role, Expires: c.Expires, Name: c.Name}, time.Now())
	if se := (*node.KeySpecError)(nil); errors.As(err, &se) {
		return fmt.Errorf("--%s: %w", se.Field, se.Err)
	} else if err != nil {
		return err
	}
	fmt.Println(key)
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
