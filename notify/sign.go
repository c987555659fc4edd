package notify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// The headers of a webhook delivery.
const (
	// SignatureHeader carries "t=<unix seconds>,v1=<hex HMAC-SHA256>":
	// the HMAC, keyed with the channel's secret, of the timestamp, a dot
	// and the raw body (Sign). A receiver recomputes it over the body as
	// received, compares in constant time, and refuses a timestamp far
	// from its clock (a replay).
	SignatureHeader = "Tock-Signature"
	// IDHeader carries the message's id (Message.ID), the same on every
	// attempt: a receiver that has seen it drops the message.
	IDHeader = "Tock-Notification-Id"
)

// Sign returns the SignatureHeader value of body sent at t with secret.
func Sign(secret, body []byte, t time.Time) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret []byte, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte("."))
	m.Write(body)
	return m.Sum(nil)
}

// Errors of Verify.
var (
	ErrBadSignature = errors.New("notify: signature does not match")
	ErrStale        = errors.New("notify: signature timestamp outside tolerance")
)

// Verify checks header, a SignatureHeader value, against body and
// secret, and that its timestamp is within tolerance of now: what a
// receiver written in Go does (docs/notifications.md shows the same in
// a few lines of Python).
func Verify(secret, body []byte, header string, now time.Time, tolerance time.Duration) error {
	var ts string
	var sigs [][]byte
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			ts = v
		case "v1":
			if b, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, b)
			}
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return ErrBadSignature
	}
	want := mac(secret, ts, body)
	ok := false
	for _, s := range sigs {
		ok = ok || hmac.Equal(s, want)
	}
	if !ok {
		return ErrBadSignature
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return ErrStale
	}
	return nil
}
