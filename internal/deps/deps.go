// Package deps pins the modules tock uses while the packages that import
// them are written; delete it once every import below has a real user.
package deps

import (
	_ "github.com/alecthomas/kong"
	_ "github.com/cenkalti/backoff/v5"
	_ "github.com/getkin/kin-openapi/openapi3"
	_ "github.com/google/uuid"
	_ "github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "github.com/labstack/echo/v4"
	_ "github.com/nats-io/nats.go/jetstream"
	_ "github.com/oapi-codegen/runtime"
	_ "github.com/pressly/goose/v3"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/robfig/cron/v3"
	_ "go.etcd.io/etcd/client/v3/concurrency"
	_ "go.uber.org/goleak"
	_ "golang.org/x/sync/errgroup"
)
