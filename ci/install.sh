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
