#!/usr/bin/env bash
# Installs the project with every extra the tests need, editable so entry points exist.
set -euo pipefail
python3 -m pip install --quiet --upgrade pip
# [docs]: the documentation build, a step of its own in .ci/run.
python3 -m pip install --quiet -e '.[dev,docs]'
# The fault soaks make writer hosts with ip netns, veth pairs, tc and ss (iproute2).
if [ "$(id -u)" = 0 ] && ! { command -v ip && command -v tc && command -v ss; } >/dev/null 2>&1; then
  apt-get install -y iproute2
fi
# The failover soak (rulvar soak URL --faults failover, issue 34): etcd from Debian, and
# Patroni pinned with its etcd3 and psycopg extras in a venv on Debian's own python3,
# which the postgres user (Patroni and PostgreSQL refuse root) can execute; the project's
# interpreter may live under root's home. RULVAR_PATRONI_PIN must match
# rulvar_conformance/faults/patroni_cluster.py's PATRONI_PIN (a test checks).
RULVAR_PATRONI_PIN=4.1.5
if [ "$(id -u)" = 0 ]; then
  if ! command -v etcd >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server
  fi
  if ! /usr/bin/python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv
  fi
  if [ "$(/opt/rulvar-patroni/bin/patroni --version 2>/dev/null)" != "patroni ${RULVAR_PATRONI_PIN}" ]; then
    rm -rf /opt/rulvar-patroni
    /usr/bin/python3 -m venv /opt/rulvar-patroni
    /opt/rulvar-patroni/bin/pip install --quiet "patroni[etcd3,psycopg3]==${RULVAR_PATRONI_PIN}"
  fi
fi
