package domain

// MaxOutputBytes is how much of a handler's output or error message is
// kept; longer text is cut to this size.
const MaxOutputBytes = 4096

// Truncate cuts s to MaxOutputBytes without splitting a UTF-8 sequence.
func Truncate(s string) string {
	if len(s) <= MaxOutputBytes {
		return s
	}
	cut := MaxOutputBytes
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut]
}
