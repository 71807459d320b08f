#!/usr/bin/env bash
# Installs the project with every extra the tests need, editable so entry points exist.
set -euo pipefail
python3 -m pip install --quiet --upgrade pip
python3 -m pip install --quiet -e '.[dev]'
