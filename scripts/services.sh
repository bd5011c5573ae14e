#!/usr/bin/env bash
# Installs (when missing), configures and starts the PostgreSQL and RabbitMQ that `make run`,
# `make test` and CI use: PostgreSQL on 127.0.0.1:5432 accepting `postgres` without a password
# from 127.0.0.1, RabbitMQ on 127.0.0.1:5672 with the default guest user. Idempotent.
# Also installs PgBouncer (not started: the tests that need it run their own, docs/operations.md).
set -euo pipefail

install_packages() {
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "services: install $* (PostgreSQL 15+, RabbitMQ 3.10+, PgBouncer 1.18+), then run this again" >&2
    exit 1
  fi
  if [ "$(id -u)" != 0 ]; then SUDO=sudo; else SUDO=; fi
  echo "services: installing $* from Debian's packages"
  # Package scripts must not try to start services through an init system the machine may not have.
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 $SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# The PgBouncer tests start their own pgbouncer process; the package's own service stays stopped.
command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ] || install_packages pgbouncer

pg_up() { pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; }
amqp_up() { (exec 3<>/dev/tcp/127.0.0.1/5672) 2>/dev/null; }

if pg_up && amqp_up; then
  exit 0
fi

missing=()
command -v pg_ctlcluster >/dev/null 2>&1 && ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || missing+=(postgresql)
command -v rabbitmq-server >/dev/null 2>&1 || missing+=(rabbitmq-server)
if ((${#missing[@]})); then
  install_packages "${missing[@]}"
fi

if ! pg_up; then
  version=$(ls /etc/postgresql 2>/dev/null | sort -V | tail -n1 || true)
  if [ -z "$version" ] || ! pg_lsclusters -h | grep -q "^$version main"; then
    version=${version:-$(ls /usr/lib/postgresql | sort -V | tail -n1)}
    pg_createcluster "$version" main >/dev/null
  fi
  hba=/etc/postgresql/$version/main/pg_hba.conf
  # The suite connects as postgres over TCP without a password: trust loopback only.
  if ! grep -q '^host all all 127.0.0.1/32 trust' "$hba"; then
    sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust' "$hba"
  fi
  conf=/etc/postgresql/$version/main/postgresql.conf
  # Tests run many databases and two pools per replica at once.
  grep -q '^max_connections = 300' "$conf" || echo 'max_connections = 300' >>"$conf"
  echo "services: starting PostgreSQL $version"
  pg_ctlcluster --skip-systemctl-redirect "$version" main start || pg_ctlcluster --skip-systemctl-redirect "$version" main restart
fi

if ! amqp_up; then
  echo "services: starting RabbitMQ"
  rabbitmq-server -detached >/dev/null 2>&1 || true
fi

for _ in $(seq 1 120); do
  if pg_up && amqp_up; then break; fi
  sleep 1
done
pg_up || { echo "services: PostgreSQL did not start (see /var/log/postgresql)" >&2; exit 1; }
if command -v rabbitmqctl >/dev/null 2>&1; then
  timeout 120 rabbitmqctl await_startup >/dev/null 2>&1 || true
fi
amqp_up || { echo "services: RabbitMQ did not start (see /var/log/rabbitmq)" >&2; exit 1; }
echo "services: PostgreSQL on 127.0.0.1:5432 and RabbitMQ on 127.0.0.1:5672 are up"
