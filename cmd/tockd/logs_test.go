package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestJSONLogs: --log-format json writes one JSON object a line, with the
// keys a log pipeline indexes; text stays key=value.
func TestJSONLogs(t *testing.T) {
	var buf bytes.Buffer
	log := newLogger(&buf, "info", "json").With("node", "n1")
	log.Info("tockd started", "bucket", 7)
	log.Warn("record events; retrying", "execution_id", "01a2", "err", "deadlock\ndetected")
	log.Debug("not at info")
	sc := bufio.NewScanner(&buf)
	var lines []map[string]any
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2 (debug is below info)", len(lines))
	}
	first, second := lines[0], lines[1]
	if first["msg"] != "tockd started" || first["level"] != "INFO" || first["node"] != "n1" || first["bucket"] != float64(7) || first["time"] == nil {
		t.Errorf("first line %v", first)
	}
	if second["execution_id"] != "01a2" || second["err"] != "deadlock\ndetected" || second["level"] != "WARN" {
		t.Errorf("second line %v", second)
	}

	buf.Reset()
	newLogger(&buf, "info", "text").Info("tockd started", "node", "n1")
	if out := buf.String(); !strings.Contains(out, `msg="tockd started" node=n1`) {
		t.Errorf("text log %q", out)
	}
}
