package api

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/time/rate"

	"github.com/tock-sched/tock/auth"
)

// Limits bound what each key and each namespace may ask of an API node.
// Zero values are no limit. Rates are per node: behind a load balancer
// over N nodes, a key may get up to N times its rate from the cluster.
type Limits struct {
	// KeyRate is the requests per second each key may send, with bursts
	// of KeyBurst (default: twice the rate, at least 1).
	KeyRate  float64
	KeyBurst int
	// NamespaceRate is the requests per second the keys of a namespace
	// may send together (keys for every namespace count against their
	// own rate only), with bursts of NamespaceBurst.
	NamespaceRate  float64
	NamespaceBurst int
	// MaxJobs is the most jobs a namespace may hold; a create past it is
	// refused (checked as jobs are created: concurrent creates may pass
	// it by as many as they are).
	MaxJobs int
	// ManualPerMinute is the most manual executions (POST /v1/jobs/{id}/run) a
	// namespace may ask for per minute.
	ManualPerMinute int
	// RequestTimeout is a request's budget (issue 44): its context ends
	// then, so that a request waiting for one of the API's connections, or
	// whose statements run on, is answered 503 with Retry-After rather
	// than held; 0 is none. The change feed and a followed log, which are
	// meant to stay open, have none.
	RequestTimeout time.Duration
	// ReadShare bounds the work of the node's reads (GET under /v1/, the
	// change feed and followed logs aside), in seconds of request time
	// per second (issue 44): each read's time is spent from a bucket
	// refilled at ReadShare a second, holding at most one second's
	// worth, and a read that finds it empty is refused with 429 and
	// Retry-After until it has refilled. 0 is none. One read at a time
	// without pause is a share of 1.
	ReadShare float64
}

// readShare is the middleware of Limits.ReadShare.
func readShare(share float64) echo.MiddlewareFunc {
	if share <= 0 {
		return nil
	}
	w := &workBucket{rate: share, tokens: share, last: time.Now()}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if r.Method != http.MethodGet || r.URL.Path == "/v1/changes" || r.URL.Query().Get("follow") == "true" ||
				!strings.HasPrefix(r.URL.Path, "/v1/") {
				return next(c)
			}
			start := time.Now()
			if wait := w.admit(start); wait > 0 {
				c.Response().Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(wait.Seconds())))))
				return newProblem(http.StatusTooManyRequests, ProblemTooManyRequests, "Too many reads",
					fmt.Sprintf("This node's reads used their share of its time (tockd --api-read-share %g s a second), "+
						"so that they do not slow what fires; retry in %s.", share, wait.Round(time.Millisecond)))
			}
			defer func() { w.spend(time.Since(start)) }()
			return next(c)
		}
	}
}

// workBucket is a token bucket of seconds of work: refilled at rate a
// second up to rate, spent by what each admitted request took. A
// request is admitted while the bucket is not empty, so one may
// overdraw it; the next wait until it has refilled.
type workBucket struct {
	mu     sync.Mutex
	rate   float64
	tokens float64
	last   time.Time
}

// admit refills the bucket to now and returns 0 if a request may go,
// else how long until it may.
func (w *workBucket) admit(now time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	if now.After(w.last) {
		w.tokens = min(w.rate, w.tokens+now.Sub(w.last).Seconds()*w.rate)
		w.last = now
	}
	if w.tokens > 0 {
		return 0
	}
	return time.Duration((-w.tokens/w.rate)*float64(time.Second)) + time.Millisecond
}

// spend takes d of work from the bucket.
func (w *workBucket) spend(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.tokens -= d.Seconds()
}

// budget is the middleware of Limits.RequestTimeout.
func budget(d time.Duration) echo.MiddlewareFunc {
	if d <= 0 {
		return nil
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if r.URL.Path == "/v1/changes" || r.URL.Query().Get("follow") == "true" || !strings.HasPrefix(r.URL.Path, "/v1/") {
				return next(c)
			}
			ctx, cancel := context.WithTimeout(r.Context(), d)
			defer cancel()
			c.SetRequest(r.WithContext(ctx))
			return next(c)
		}
	}
}

// ProblemTooManyRequests and ProblemQuota are the problem types of a
// rate limit and of a quota.
const (
	ProblemTooManyRequests = "https://tock.dev/problems/too-many-requests"
	ProblemQuota           = "https://tock.dev/problems/quota-exceeded"
)

// limiters are the token buckets of keys, namespaces and namespaces'
// runs, made on first use.
type limiters struct {
	cfg Limits
	mu  sync.Mutex
	m   map[string]*rate.Limiter
}

func burstOf(r float64, b int) int {
	if b > 0 {
		return b
	}
	return max(1, int(math.Ceil(2*r)))
}

func (l *limiters) get(name string, r float64, burst int) *rate.Limiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]*rate.Limiter{}
	}
	lim := l.m[name]
	if lim == nil {
		lim = rate.NewLimiter(rate.Limit(r), burst)
		l.m[name] = lim
	}
	return lim
}

// take takes a token from lim, or says how long until there is one;
// either way it sets the RateLimit headers (draft-ietf-httpapi-ratelimit-headers).
func take(c echo.Context, lim *rate.Limiter, now time.Time) time.Duration {
	r := lim.ReserveN(now, 1)
	delay := r.DelayFrom(now)
	if delay > 0 {
		r.CancelAt(now)
	}
	h := c.Response().Header()
	burst := lim.Burst()
	left := max(0, int(lim.TokensAt(now)))
	h.Set("RateLimit-Limit", strconv.Itoa(burst))
	h.Set("RateLimit-Remaining", strconv.Itoa(left))
	full := time.Duration(float64(burst-left) / float64(lim.Limit()) * float64(time.Second))
	h.Set("RateLimit-Reset", strconv.Itoa(int(math.Ceil(full.Seconds()))))
	return delay
}

// tooMany is a 429 with Retry-After.
func tooMany(c echo.Context, field string, delay time.Duration, detail string) *apiError {
	c.Response().Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(delay.Seconds())))))
	return withField(newProblem(http.StatusTooManyRequests, ProblemTooManyRequests, "Too many requests", detail),
		field, "is over its rate limit")
}

// limitRequest applies the key's and its namespace's request rates to a
// request by who (no limit for the open server's anonymous principal).
func (s *Server) limitRequest(c echo.Context, who *auth.Principal) error {
	if who == auth.Anonymous {
		return nil
	}
	now := time.Now()
	if r := s.limits.cfg.KeyRate; r > 0 {
		if d := take(c, s.limits.get(who.Subject, r, burstOf(r, s.limits.cfg.KeyBurst)), now); d > 0 {
			return tooMany(c, "Authorization", d, fmt.Sprintf("%s sent more than %g requests a second (tockd --rate-limit-key); retry in %s",
				who.Subject, r, d.Round(time.Millisecond)))
		}
	}
	if r := s.limits.cfg.NamespaceRate; r > 0 {
		for _, ns := range who.NamespacesWith(auth.Reader) {
			if ns == auth.AllNamespaces {
				continue // a key for every namespace has its own rate only
			}
			if d := take(c, s.limits.get("ns:"+ns, r, burstOf(r, s.limits.cfg.NamespaceBurst)), now); d > 0 {
				return tooMany(c, "Authorization", d, fmt.Sprintf("the keys of namespace %s sent more than %g requests a second (tockd --rate-limit-namespace); retry in %s",
					ns, r, d.Round(time.Millisecond)))
			}
		}
	}
	return nil
}

// checkJobQuota refuses to add n jobs to namespace ns past MaxJobs.
func (s *Server) checkJobQuota(c echo.Context, field, ns string, n int) error {
	max := s.limits.cfg.MaxJobs
	if max <= 0 {
		return nil
	}
	have, err := s.store.CountJobs(c.Request().Context(), ns, max+1)
	if err != nil {
		return err
	}
	if have+n > max {
		return withField(newProblem(http.StatusForbidden, ProblemQuota, "Quota exceeded",
			fmt.Sprintf("namespace %s holds %d jobs; its limit is %d (tockd --max-jobs-per-namespace)", ns, have, max)),
			field, "has no room for more jobs")
	}
	return nil
}

// checkRunQuota takes one of namespace ns's manual runs of the minute.
func (s *Server) checkRunQuota(c echo.Context, ns string) error {
	per := s.limits.cfg.ManualPerMinute
	if per <= 0 {
		return nil
	}
	lim := s.limits.get("runs:"+ns, float64(per)/60, per)
	if d := take(c, lim, time.Now()); d > 0 {
		return tooMany(c, "id", d, fmt.Sprintf("namespace %s asked for more than %d manual runs a minute (tockd --max-runs-per-minute); retry in %s",
			ns, per, d.Round(time.Second)))
	}
	return nil
}
