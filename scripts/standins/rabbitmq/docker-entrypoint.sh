#!/bin/bash
# Writes the configuration the upstream rabbitmq image derives from its environment, then runs the
# broker as the rabbitmq user.
set -euo pipefail
mkdir -p /etc/rabbitmq/conf.d /var/lib/rabbitmq
{
	echo "loopback_users = none"
	echo "default_user = ${RABBITMQ_DEFAULT_USER:-guest}"
	echo "default_pass = ${RABBITMQ_DEFAULT_PASS:-guest}"
} >/etc/rabbitmq/conf.d/10-defaults.conf
if [ -n "${RABBITMQ_ERLANG_COOKIE:-}" ]; then
	cookie=/var/lib/rabbitmq/.erlang.cookie
	rm -f "$cookie"
	printf '%s' "$RABBITMQ_ERLANG_COOKIE" >"$cookie"
	chmod 400 "$cookie"
fi
# Mounted configuration may be read-only: only what this script wrote changes owner.
chown -R rabbitmq:rabbitmq /var/lib/rabbitmq
chown rabbitmq:rabbitmq /etc/rabbitmq/conf.d/10-defaults.conf
if [ "${1:-rabbitmq-server}" = rabbitmq-server ]; then
	exec setpriv --reuid=rabbitmq --regid=rabbitmq --init-groups /usr/lib/rabbitmq/bin/rabbitmq-server
fi
exec "$@"
