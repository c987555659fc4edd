package jobfile

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/tock-sched/tock/api/models"
)

// SecretRef is where a secret header's value comes from at apply time:
// an environment variable or a file, never the job file itself.
type SecretRef struct {
	Env  string // the variable's name
	File string // the file's path; its content less one trailing newline

	file string // the job file and line it is written at, for errors
	line int
}

// refPrefix starts a reference kept in a JobCreate's secret headers
// until Resolve. It holds a NUL byte, which the API refuses in a header
// value, so that a reference sent unresolved is a 400, never a header.
const refPrefix = "\x00tock-secret-ref\x00"

func (r SecretRef) encode() string {
	kind, v := "env", r.Env
	if r.File != "" {
		kind, v = "file", r.File
	}
	return refPrefix + kind + "\x00" + v + "\x00" + r.file + "\x00" + strconv.Itoa(r.line)
}

// RefOf reports whether a secret header's value, as Parse left it, is a
// reference, and which.
func RefOf(value string) (SecretRef, bool) {
	rest, ok := strings.CutPrefix(value, refPrefix)
	if !ok {
		return SecretRef{}, false
	}
	parts := strings.Split(rest, "\x00")
	if len(parts) != 4 {
		return SecretRef{}, false
	}
	r := SecretRef{file: parts[2]}
	r.line, _ = strconv.Atoi(parts[3])
	if parts[0] == "file" {
		r.File = parts[1]
	} else {
		r.Env = parts[1]
	}
	return r, true
}

func (r SecretRef) String() string {
	if r.File != "" {
		return "{file: " + r.File + "}"
	}
	return "{env: " + r.Env + "}"
}

// Resolve replaces the secret header references of jobs (as Parse reads
// them) with their values: lookupEnv (os.LookupEnv) for {env: VAR},
// readFile (os.ReadFile) for {file: PATH}, whose content is taken less
// one trailing newline. A variable that is not set, a file that cannot be
// read, and an empty value are errors naming the job file and line; all
// are reported, joined. Values that are not references are left alone.
func Resolve(jobs []models.JobCreate, lookupEnv func(string) (string, bool), readFile func(string) ([]byte, error)) error {
	var errs []error
	for i := range jobs {
		h := &jobs[i].Handler
		if h.SecretHeaders == nil {
			continue
		}
		out := make(map[string]string, len(*h.SecretHeaders))
		for _, name := range slices.Sorted(maps.Keys(*h.SecretHeaders)) {
			v := (*h.SecretHeaders)[name]
			ref, ok := RefOf(v)
			if !ok {
				out[name] = v
				continue
			}
			fail := func(msg string) {
				errs = append(errs, &Error{File: ref.file, Line: ref.line,
					Path: fmt.Sprintf("%s.handler.secret_headers.%s", jobName(jobs[i]), name), Msg: msg})
			}
			switch {
			case ref.Env != "":
				val, set := lookupEnv(ref.Env)
				if !set {
					fail(fmt.Sprintf("environment variable %s is not set", ref.Env))
					continue
				}
				if val == "" {
					fail(fmt.Sprintf("environment variable %s is empty", ref.Env))
					continue
				}
				v = val
			default:
				b, err := readFile(ref.File)
				if err != nil {
					fail(fmt.Sprintf("read secret: %v", err))
					continue
				}
				v = strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
				if v == "" {
					fail(fmt.Sprintf("secret file %s is empty", ref.File))
					continue
				}
			}
			out[name] = v
		}
		h.SecretHeaders = &out
	}
	return errors.Join(errs...)
}

// jobName is namespace/name, the namespace "default" when absent.
func jobName(j models.JobCreate) string {
	ns := "default"
	if j.Namespace != nil {
		ns = *j.Namespace
	}
	return ns + "/" + j.Name
}
