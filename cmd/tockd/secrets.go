package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/tock-sched/tock/node"
	"github.com/tock-sched/tock/secret"
)

// SecretFlags name the key file of the secrets jobs carry; serve, dev and
// `secrets reencrypt` take them.
type SecretFlags struct {
	SecretKeyFile string `name:"secret-key-file" env:"TOCK_SECRET_KEY_FILE" help:"File of the keys that encrypt secret headers (api and executor roles; the same file on every node): lines <key-id>:<base64 of 32 bytes>, the first encrypts, all decrypt; readable by tockd's user alone. Without it, jobs with secret headers are refused. tockd secrets generate-key makes a line." placeholder:"FILE"`
}

// load reads the key file; nil when none is named.
func (f SecretFlags) load() (*secret.Keyring, error) { return node.LoadKeyring(f.SecretKeyFile) }

// SecretsCmd groups the commands of secret keys.
type SecretsCmd struct {
	GenerateKey GenerateKeyCmd `cmd:"" name:"generate-key" help:"Print a new key line for --secret-key-file."`
	Reencrypt   ReencryptCmd   `cmd:"" help:"Re-encrypt every stored secret under the first key of --secret-key-file (the last step but one of a key rotation)."`
}

// GenerateKeyCmd prints a new key line.
type GenerateKeyCmd struct {
	ID string `name:"id" help:"The key's id (default k<UTC date and time>, such as k20261124T0305)." placeholder:"ID"`
}

// Run prints the line.
func (c *GenerateKeyCmd) Run() error {
	id := c.ID
	if id == "" {
		id = "k" + time.Now().UTC().Format("20060102T1504")
	}
	line, err := secret.GenerateKey(id)
	if err != nil {
		return err
	}
	fmt.Println(line)
	return nil
}

// ReencryptCmd rewrites every stored secret under the key file's first
// key.
type ReencryptCmd struct {
	Common
	SecretFlags
	Batch int `name:"batch" default:"500" help:"Rows re-encrypted per transaction."`
}

// Run re-encrypts, and fails if a value could not be opened with any key
// of the file.
func (c *ReencryptCmd) Run() error {
	if c.SecretKeyFile == "" {
		return errors.New("--secret-key-file (or TOCK_SECRET_KEY_FILE) is required: its first key re-encrypts, all of them decrypt")
	}
	k, err := c.load()
	if err != nil {
		return err
	}
	ctx, st, done, err := commandStore(c.PostgresURL, false)
	if err != nil {
		return err
	}
	defer done()
	res, err := node.ReencryptSecrets(ctx, st, k, c.Batch)
	fmt.Printf("re-encrypted under key %s: %d job specs and %d jobs (of %d with secret headers)\n", k.Primary(), res.Specs, res.Jobs, res.Seen)
	for _, f := range res.Failed {
		fmt.Fprintf(os.Stderr, "not re-encrypted: %s %s: %v\n", f.Table, f.ID, f.Err)
	}
	if err != nil {
		return err
	}
	if len(res.Failed) > 0 {
		return fmt.Errorf("%d rows could not be re-encrypted: their keys are not in %s", len(res.Failed), c.SecretKeyFile)
	}
	return nil
}
