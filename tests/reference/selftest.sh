#!/usr/bin/env bash
# Runs selftest.py with Debian's python3 (numpy), which has what it needs.
set -euo pipefail
cd "$(dirname "$0")"
exec /usr/bin/python3 selftest.py
