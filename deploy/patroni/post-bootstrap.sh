#!/bin/sh
# Run once by Patroni on the member that initialises the cluster: the role
# and database tockd uses. $1 is a connection URL to the new primary.
set -eu
psql "$1" -v ON_ERROR_STOP=1 \
  -c "CREATE ROLE tock LOGIN PASSWORD '${DB_TOCK_PASSWORD}'" \
  -c "CREATE DATABASE tock OWNER tock"
