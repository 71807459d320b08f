#!/usr/bin/env bash
# Makes sure the local PostgreSQL 15 cluster answers on 127.0.0.1:5432, starting it if
# it is down. Exits non-zero if it cannot be brought up: CI must then fail, not skip.
set -euo pipefail
ready() { pg_isready -q -h 127.0.0.1 -p 5432; }
if ready; then exit 0; fi
if command -v pg_ctlcluster >/dev/null 2>&1; then
  pg_ctlcluster --skip-systemctl-redirect 15 main start || true
fi
for _ in $(seq 1 60); do
  if ready; then exit 0; fi
  sleep 1
done
echo "PostgreSQL did not come up on 127.0.0.1:5432" >&2
exit 1
