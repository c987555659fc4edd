package logs

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tock-sched/tock/wire"
)

// Whatever a message holds, Decode never panics and returns only chunks
// a reader can show: each valid, its lines non-empty, valid UTF-8 without
// NUL, at most 64 KiB. (go test -fuzz FuzzDecode ./logs explores; make
// test runs the seeds.)
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		`[{"execution_id":"0193b6e2-7c1a-7d41-9a55-1c0e2f7b8a10","scheduled_for":"2030-01-02T03:00:00Z","attempt":1,"namespace":"default","seq":1,"stream":"stdout","offset":0,"lines":[{"at":"2030-01-02T03:00:01Z","text":"hi\n"}]}]`,
		`{"execution_id":"0193b6e2-7c1a-7d41-9a55-1c0e2f7b8a10","scheduled_for":"2030-01-02T03:00:00Z","attempt":1,"namespace":"d","seq":2,"stream":"err","offset":3,"end":true,"lines":[]}`,
		`[{"execution_id":"x","attempt":0}]`,
		`[{"execution_id":"0193b6e2-7c1a-7d41-9a55-1c0e2f7b8a10","scheduled_for":"2030-01-02T03:00:00Z","attempt":1,"namespace":"d","seq":1,"stream":"a b","lines":[{"at":"2030-01-02T03:00:01Z","text":"\u0000\ud800"}]}]`,
		`[{"execution_id":"0193b6e2-7c1a-7d41-9a55-1c0e2f7b8a10","scheduled_for":"2030-01-02T03:00:00Z","attempt":1,"namespace":"d","seq":1,"stream":"s","offset":-5,"trim_from":9,"trim_before":2,"lines":[{"at":"2030-01-02T03:00:01Z","text":"` + strings.Repeat("é", 40000) + `"}]}]`,
		`not json`, `[]`, `null`, `[null]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		chunks, bad := Decode(data)
		if bad < -1 {
			t.Fatalf("bad %d", bad)
		}
		for _, c := range chunks {
			if c.Attempt < 1 || c.Seq < 1 || c.Offset < 0 || wire.ValidLogStream(c.Stream) != nil {
				t.Fatalf("chunk %+v passed", c)
			}
			n := 0
			for _, l := range c.Lines {
				if l.Text == "" || len(l.Text) > wire.MaxLogLineBytes || !utf8.ValidString(l.Text) || strings.IndexByte(l.Text, 0) >= 0 {
					t.Fatalf("line %q passed", l.Text)
				}
				n += len(l.Text)
			}
			if n != c.Bytes {
				t.Fatalf("chunk says %d bytes, its lines hold %d", c.Bytes, n)
			}
		}
	})
}
