// Package monitoring holds no code: it is tock's Prometheus alert and
// recording rules and Grafana dashboard (the files beside this one, see
// README.md), and the tests that check them with promtool and against a
// real Prometheus scraping a real tockd.
package monitoring
