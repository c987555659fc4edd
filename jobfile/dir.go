package jobfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/tock-sched/tock/api/models"
)

// ParseDir reads every *.yaml, *.yml and *.json file under dir, in
// subdirectories too, in lexical order of their paths, as Parse does.
// Two jobs with the same namespace and name (the namespace "default"
// when absent) are an error naming both files and lines. Every file's
// errors are reported, joined.
func ParseDir(dir string) ([]models.JobCreate, error) {
	located, err := ParseDirLocated(dir)
	if err != nil {
		return nil, err
	}
	jobs := make([]models.JobCreate, len(located))
	for i, l := range located {
		jobs[i] = l.Job
	}
	return jobs, nil
}

// Located is a job of a file and where it starts.
type Located struct {
	Job  models.JobCreate
	File string
	Line int
}

// Where is "file:line".
func (l Located) Where() string { return fmt.Sprintf("%s:%d", l.File, l.Line) }

// ParseDirLocated is ParseDir with where each job is, so that what the
// server says of jobs[i] can be told of its file and line.
func ParseDirLocated(dir string) ([]Located, error) {
	var names []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch strings.ToLower(filepath.Ext(path)) {
		case ".yaml", ".yml", ".json":
			if !d.IsDir() {
				names = append(names, path)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read job files: %w", err)
	}
	var (
		errs  []error
		all   []parsed
		where = map[string]parsed{}
	)
	for _, name := range names { // WalkDir walks in lexical order
		data, err := os.ReadFile(name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ps, err := parse(name, data)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, p := range ps {
			key := jobName(p.job)
			if first, dup := where[key]; dup {
				errs = append(errs, &Error{File: p.file, Line: p.line,
					Msg: fmt.Sprintf("job %s is also defined at %s:%d", key, first.file, first.line)})
				continue
			}
			where[key] = p
			all = append(all, p)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	out := make([]Located, len(all))
	for i, p := range all {
		out[i] = Located{Job: p.job, File: p.file, Line: p.line}
	}
	return out, nil
}
