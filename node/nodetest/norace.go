//go:build !race

package nodetest

// raceEnabled builds tockd processes with the race detector when the
// tests run with it.
const raceEnabled = false
