package executor

import (
	"bytes"
	"log/slog"
	"testing"
)

// A lazy logger writes exactly what the logger it wraps would have
// written, attributes and groups in the same places, and nothing for a
// level the handler below leaves out.
func TestLazyLoggerWritesWhatItsHandlerWould(t *testing.T) {
	noTime := func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}
	log := func(l *slog.Logger) {
		l = l.With("executor", "e1")
		a := l.With("queue", "q", "attempt", 2).With("job_id", "j")
		a.Debug("hidden", "x", 1)
		a.Info("started", "n", 3)
		a.WithGroup("g").With("in", true).Warn("grouped", "k", "v")
		l.Error("plain")
	}
	for _, mk := range []func(*bytes.Buffer) slog.Handler{
		func(b *bytes.Buffer) slog.Handler {
			return slog.NewTextHandler(b, &slog.HandlerOptions{ReplaceAttr: noTime})
		},
		func(b *bytes.Buffer) slog.Handler {
			return slog.NewJSONHandler(b, &slog.HandlerOptions{ReplaceAttr: noTime})
		},
	} {
		var want, got bytes.Buffer
		log(slog.New(mk(&want)))
		log(newLazyLogger(slog.New(mk(&got))))
		if got.String() != want.String() {
			t.Errorf("lazy logger wrote\n%s\nwant\n%s", got.String(), want.String())
		}
		if bytes.Contains(got.Bytes(), []byte("hidden")) {
			t.Errorf("a Debug record reached an Info handler:\n%s", got.String())
		}
	}
}
