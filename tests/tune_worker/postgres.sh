#!/usr/bin/env bash
# A throwaway PostgreSQL server for tests/test_tune_postgres.py (and .ci/run):
#
#   tests/tune_worker/postgres.sh start DIR   # prints postgresql://tuner:PASSWORD@127.0.0.1:PORT/optuna
#   tests/tune_worker/postgres.sh stop DIR
#
# `start` makes a cluster in DIR/data (initdb, password authentication), starts it on
# 127.0.0.1 on a free port (its socket in DIR), creates the user `tuner` with a random
# password and its database `optuna`, and prints the URL. It needs the server binaries
# (Debian: apt-get install -y postgresql); as root it runs them as the `postgres` user.
set -euo pipefail
action=${1:?usage: postgres.sh start|stop DIR}
dir=$(cd "${2:?usage: postgres.sh start|stop DIR}" && pwd)

bindir=$(command -v pg_ctl >/dev/null && dirname "$(readlink -f "$(command -v pg_ctl)")" ||
  ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
if [ -z "$bindir" ] || [ ! -x "$bindir/pg_ctl" ]; then
  echo "postgres.sh: no PostgreSQL server binaries (pg_ctl); apt-get install -y postgresql" >&2
  exit 1
fi

as_owner() {  # the server refuses to run as root
  if [ "$(id -u)" = 0 ]; then
    su postgres -s /bin/sh -c "$*"
  else
    sh -c "$*"
  fi
}

if [ "$action" = stop ]; then
  as_owner "'$bindir/pg_ctl' -D '$dir/data' -m fast -w stop" >/dev/null
  exit 0
fi

[ "$(id -u)" = 0 ] && chown postgres "$dir"
superuser=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
password=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
(umask 077 && echo "$superuser" >"$dir/superuser")
[ "$(id -u)" = 0 ] && chown postgres "$dir/superuser"
as_owner "'$bindir/initdb' -D '$dir/data' -U postgres --auth=scram-sha-256 --pwfile='$dir/superuser' -E UTF8" >/dev/null
as_owner "'$bindir/pg_ctl' -D '$dir/data' -l '$dir/server.log' -w -o \"-c listen_addresses=127.0.0.1 -p $port -k '$dir'\" start" >/dev/null
PGPASSWORD=$superuser "$bindir/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -q \
  -v ON_ERROR_STOP=1 -c "CREATE USER tuner PASSWORD '$password'" \
  -c "CREATE DATABASE optuna OWNER tuner" >/dev/null
echo "postgresql://tuner:$password@127.0.0.1:$port/optuna"
