#!/usr/bin/env bash
# Starts the services the tests need, idempotently, and prints their addresses as
# environment assignments: a PostgreSQL server with a test database, and a podman
# Docker-compatible API service (runtime runc: this kernel's hybrid cgroups make crun refuse).
set -euo pipefail
[ "$(id -u)" -eq 0 ] || { echo "services: run as root (tests start PostgreSQL and podman)" >&2; exit 1; }

run=/run/porthole-test
mkdir -p "$run"

# PostgreSQL: Debian's cluster, started by hand (no systemd here).
ver=$(ls /usr/lib/postgresql 2>/dev/null | sort -n | tail -1)
[ -n "$ver" ] || { echo "services: PostgreSQL is not installed (make deps)" >&2; exit 1; }
if ! pg_lsclusters -h 2>/dev/null | grep -q "^$ver main"; then
	pg_createcluster "$ver" main >/dev/null
fi
if ! pg_lsclusters -h | grep -q "^$ver main .* online"; then
	pg_ctlcluster "$ver" main start
fi
for _ in $(seq 50); do pg_isready -q -h 127.0.0.1 && break; sleep 0.2; done
su postgres -c "psql -qtAc \"SELECT 1 FROM pg_roles WHERE rolname='porthole'\"" | grep -q 1 ||
	su postgres -c "psql -qc \"CREATE ROLE porthole LOGIN SUPERUSER PASSWORD 'porthole'\""
su postgres -c "psql -qtAc \"SELECT 1 FROM pg_database WHERE datname='porthole_test'\"" | grep -q 1 ||
	su postgres -c "psql -qc 'CREATE DATABASE porthole_test OWNER porthole'"

# podman's Docker-compatible API.
sock="$run/podman.sock"
if ! curl -fsS --max-time 2 --unix-socket "$sock" http://d/_ping >/dev/null 2>&1; then
	rm -f "$sock"
	(cd "$run" && exec nohup podman --runtime /usr/sbin/runc system service --time=0 "unix://$sock" >"$run/podman.log" 2>&1) &
	for _ in $(seq 100); do
		curl -fsS --max-time 1 --unix-socket "$sock" http://d/_ping >/dev/null 2>&1 && break
		sleep 0.1
	done
	curl -fsS --max-time 2 --unix-socket "$sock" http://d/_ping >/dev/null || {
		echo "services: podman API did not start; see $run/podman.log" >&2; exit 1; }
fi

# An unprivileged account for the isolation tests that run the gateway as non-root. It reaches the
# engine the way a deployment's gateway user would: through a group that owns the engine's socket.
id porthole >/dev/null 2>&1 || useradd --system --home-dir /nonexistent --shell /usr/sbin/nologin porthole
getent group porthole-engine >/dev/null || groupadd --system porthole-engine
id -nG porthole | tr ' ' '\n' | grep -qx porthole-engine || usermod -a -G porthole-engine porthole
chmod 0755 "$run"
chgrp porthole-engine "$sock"
chmod 0660 "$sock"

echo "services: PostgreSQL $ver on 127.0.0.1:5432, podman API on unix://$sock" >&2
