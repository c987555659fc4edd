package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// clockTicks is the kernel's USER_HZ, the unit of utime and stime in
// /proc/<pid>/stat: 100 on every Linux architecture Go builds for.
const clockTicks = 100

// CPU is the CPU time the processes on this machine spent during the
// measured window, per execution recorded in it.
type CPU struct {
	// Seconds is the length of the sampled interval.
	Seconds float64 `json:"seconds"`
	// Executions is how many of the run's executions were recorded as
	// finished (finished_at) during the interval.
	Executions int64 `json:"executions"`
	// Components are the processes by component, heaviest first.
	Components []CPUComponent `json:"components"`
	// TotalUS is the components' CPU per execution together, in µs.
	TotalUS float64 `json:"total_us_per_execution"`
}

// CPUComponent is one component's share.
type CPUComponent struct {
	Name string `json:"name"`
	// Processes is how many processes were counted (Postgres has one per
	// connection plus its background workers).
	Processes int `json:"processes"`
	// Cores is the component's CPU time ÷ the interval: 1.0 is one core.
	Cores float64 `json:"cores"`
	// USPerExecution is its CPU time ÷ executions, in µs.
	USPerExecution float64 `json:"us_per_execution"`
}

// procTimes is one reading of every process's utime + stime, in ticks,
// with its command name.
type procTimes map[int]procTime

type procTime struct {
	comm  string
	ticks int64
	// db is, for a Postgres client backend, the database it is connected
	// to (from its process title); "" for any other process.
	db string
}

// otherDatabases names the Postgres backends of databases other than the
// run's (a test suite sharing the server, say): reported apart and left
// out of the total, so that they do not count as the run's cost.
const otherDatabases = "postgres (other databases)"

// readProcs reads /proc/<pid>/stat of every process it may read.
// Processes that end between two readings lose what they spent since
// the first; Postgres backends and tockd live through a window.
func readProcs() procTimes {
	pt := procTimes{}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(d + "/stat")
		if err != nil {
			continue
		}
		comm, ticks, ok := parseStat(raw)
		if !ok {
			continue
		}
		t := procTime{comm: comm, ticks: ticks}
		if comm == "postgres" {
			if title, err := os.ReadFile(d + "/cmdline"); err == nil {
				t.db = backendDatabase(string(title))
			}
		}
		pt[pid] = t
	}
	return pt
}

// parseStat reads the command name and utime + stime from a
// /proc/<pid>/stat line: "pid (comm) state ppid ...", utime and stime
// being fields 14 and 15. The name may hold spaces and parentheses, so
// the fields are counted from its last ')'.
func parseStat(raw []byte) (comm string, ticks int64, ok bool) {
	open, end := bytes.IndexByte(raw, '('), bytes.LastIndexByte(raw, ')')
	if open < 0 || end < open {
		return "", 0, false
	}
	fields := strings.Fields(string(raw[end+1:]))
	// fields[0] is field 3 (state): utime (14) is fields[11], stime fields[12].
	if len(fields) < 13 {
		return "", 0, false
	}
	u, err1 := strconv.ParseInt(fields[11], 10, 64)
	s, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return "", 0, false
	}
	return string(raw[open+1 : end]), u + s, true
}

// backendDatabase is the database of a Postgres client backend from its
// process title ("postgres: [cluster: ]user database host(port) activity",
// as /proc/<pid>/cmdline shows it); "" for the postmaster and background
// processes (checkpointer, WAL writer, …), which serve every database.
func backendDatabase(title string) string {
	title = strings.TrimRight(strings.ReplaceAll(title, "\x00", " "), " ")
	rest, ok := strings.CutPrefix(title, "postgres: ")
	if !ok {
		return ""
	}
	f := strings.Fields(rest)
	if len(f) > 0 && strings.HasSuffix(f[0], ":") { // Debian's cluster name, "15/main:"
		f = f[1:]
	}
	if len(f) >= 3 && (strings.Contains(f[2], "(") || f[2] == "[local]") {
		return f[1]
	}
	return ""
}

// component names the component a process belongs to: tockbench itself
// is the executors (its in-process workers are nearly all it does during
// a window); "" for a process of none. A Postgres backend of a database
// other than db is otherDatabases.
func component(pid int, t procTime, db string) string {
	comm := t.comm
	switch {
	case pid == os.Getpid():
		return "executors (tockbench)"
	case comm == "postgres" || strings.HasPrefix(comm, "postgres:"):
		if t.db != "" && db != "" && t.db != db {
			return otherDatabases
		}
		return "postgres"
	case comm == "tockd":
		return "tockd"
	case comm == "nats-server":
		return "nats-server"
	case comm == "etcd":
		return "etcd"
	}
	return ""
}

// cpuBetween is what each component spent from a to b, per execution.
// A process in b but not in a started during the interval and counts
// whole.
//
// Postgres backends of databases other than db are reported apart
// (otherDatabases) and left out of TotalUS.
func cpuBetween(a, b procTimes, db string, seconds float64, executions int64) *CPU {
	type acc struct {
		procs int
		ticks int64
	}
	by := map[string]*acc{}
	for pid, t := range b {
		name := component(pid, t, db)
		if name == "" {
			continue
		}
		d := t.ticks
		if old, ok := a[pid]; ok && old.comm == t.comm {
			d -= old.ticks
		}
		c := by[name]
		if c == nil {
			c = &acc{}
			by[name] = c
		}
		c.procs++
		c.ticks += d
	}
	cpu := &CPU{Seconds: seconds, Executions: executions}
	for name, c := range by {
		secs := float64(c.ticks) / clockTicks
		comp := CPUComponent{Name: name, Processes: c.procs, Cores: secs / seconds}
		if executions > 0 {
			comp.USPerExecution = secs * 1e6 / float64(executions)
		}
		if name != otherDatabases {
			cpu.TotalUS += comp.USPerExecution
		}
		cpu.Components = append(cpu.Components, comp)
	}
	slices.SortFunc(cpu.Components, func(x, y CPUComponent) int {
		if x.Cores != y.Cores {
			if x.Cores > y.Cores {
				return -1
			}
			return 1
		}
		return strings.Compare(x.Name, y.Name)
	})
	return cpu
}

// cpuWindow samples the processes at the start of an interval; its
// finish reads them again and divides by the run's executions recorded
// as finished in between (by the database's clock).
type cpuWindow struct {
	start    procTimes
	startAt  time.Time // local monotonic clock
	dbFrom   time.Time
	disabled bool
}

func (b *bench) startCPU() *cpuWindow {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		return &cpuWindow{disabled: true}
	}
	return &cpuWindow{start: readProcs(), startAt: time.Now(), dbFrom: b.dbNow()}
}

// finishCPU ends w and returns the CPU per execution, nil without /proc.
func (b *bench) finishCPU(ctx context.Context, w *cpuWindow) (*CPU, error) {
	if w.disabled {
		return nil, nil
	}
	end, secs, dbTo := readProcs(), time.Since(w.startAt).Seconds(), b.dbNow()
	// Executions recorded in the interval, whatever their scheduled time
	// (under overload they are older than the interval); the bounds on
	// scheduled_for let the planner prune the day partitions.
	var n int64
	err := b.st.Pool().QueryRow(ctx, `SELECT count(*) FROM executions
		WHERE namespace = $1 AND finished_at >= $2 AND finished_at < $3
			AND scheduled_for >= $2::timestamptz - interval '1 hour' AND scheduled_for < $3`,
		b.ns, w.dbFrom, dbTo).Scan(&n)
	if err != nil {
		return nil, fmt.Errorf("count executions recorded: %w", err)
	}
	return cpuBetween(w.start, end, b.st.Pool().Config().ConnConfig.Database, secs, n), nil
}

// writeCPU prints c, one line per component.
func writeCPU(p func(string, ...any), c *CPU) {
	if c == nil {
		return
	}
	p("  CPU/execution  %.0f µs in all (%d executions recorded in %.0f s)", c.TotalUS, c.Executions, c.Seconds)
	for _, comp := range c.Components {
		note := ""
		if comp.Name == otherDatabases {
			note = ", not counted"
		}
		p("                 %-22s %6.1f µs  %4.0f%% of a core  (%d processes%s)", comp.Name, comp.USPerExecution, comp.Cores*100, comp.Processes, note)
	}
}

// cpuSummary is c on one line: the total and each component, in µs per
// execution.
func cpuSummary(c *CPU) string {
	parts := make([]string, 0, len(c.Components))
	for _, comp := range c.Components {
		parts = append(parts, fmt.Sprintf("%s %.0f", comp.Name, comp.USPerExecution))
	}
	return fmt.Sprintf("%.0f µs/execution (%s)", c.TotalUS, strings.Join(parts, ", "))
}
