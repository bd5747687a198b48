#!/usr/bin/env bash
# Write constraints.txt: the exact versions installed in a virtual environment (default .venv),
# which scripts/setup.sh then installs with `-c constraints.txt`, so a fresh set-up gets the
# versions that were tested. Usage: scripts/lock.sh [VENV] (or `make lock`).
# m3agent itself is left out; local version labels (torch 2.13.0+cpu) are dropped so the pin
# matches the CPU wheel and the PyPI wheel alike. Packages installed with --no-deps and the
# locally compiled llama-cpp-python wheel are pinned like the rest (setup.sh reads its version here).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${1:-.venv}"
OUT=constraints.txt
[ -x "$VENV/bin/python" ] || { echo "no virtual environment at $VENV: run make setup first" >&2; exit 2; }

tmp="$(mktemp)"
trap 'rm -f "$tmp"' EXIT
{
  echo "# Exact versions of every package m3agent was tested with (CPython $("$VENV/bin/python" -c \
    'import sys; print(".".join(map(str, sys.version_info[:2])))'), Linux x86_64)."
  echo "# Installed by scripts/setup.sh with -c; refresh with \`make lock\` (see README, Development)."
  "$VENV/bin/python" -m pip --disable-pip-version-check freeze --all --exclude-editable \
    | grep -v -i -E '^(m3agent|-e |#)' \
    | sed -E 's/^([A-Za-z0-9_.-]+)==([^+ ]+)\+[^ ]*$/\1==\2/' \
    | LC_ALL=C sort -f
} > "$tmp"
mv "$tmp" "$OUT"
trap - EXIT
echo "wrote $OUT ($(grep -c '==' "$OUT") pins from $VENV)" >&2
