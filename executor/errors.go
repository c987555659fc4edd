package executor

import (
	"errors"
	"time"
)

// ErrCancelled is the cause (context.Cause) of a handler's context when
// the execution was cancelled while the attempt ran:
//
//	if errors.Is(context.Cause(ctx), executor.ErrCancelled) { ... }
var ErrCancelled = errors.New("executor: execution cancelled")

// Permanent marks err as a failure that no retry can fix (a malformed
// request, a 4xx answer): the attempt is the execution's last, whatever
// its retry policy. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err, or an error it wraps, was marked with
// Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// RetryAfter marks err as a retryable failure whose next attempt should
// come after d, instead of after the backoff of the job's retry policy (a
// target that answered "busy, try again in 30 s"). The retry policy's
// MaxAttempts still applies: after the last attempt the execution is dead.
// A negative d counts as 0; Permanent wins over RetryAfter when err is
// marked with both. RetryAfter(nil, d) is nil.
func RetryAfter(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &retryAfterError{err: err, after: max(d, 0)}
}

// retryAfter returns the delay err asks for with RetryAfter, if any.
func retryAfter(err error) (time.Duration, bool) {
	var r *retryAfterError
	if errors.As(err, &r) {
		return r.after, true
	}
	return 0, false
}

type retryAfterError struct {
	err   error
	after time.Duration
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }
