package executor

import (
	"errors"
	"fmt"
	"testing"
)

func TestPermanent(t *testing.T) {
	base := errors.New("bad input")
	p := Permanent(base)
	if !IsPermanent(p) || !IsPermanent(fmt.Errorf("wrapped: %w", p)) {
		t.Error("IsPermanent false for a Permanent error")
	}
	if !errors.Is(p, base) || p.Error() != "bad input" {
		t.Errorf("Permanent hides its cause: %v", p)
	}
	if IsPermanent(base) || IsPermanent(nil) || Permanent(nil) != nil {
		t.Error("IsPermanent/Permanent wrong for plain or nil errors")
	}
}
