#!/bin/sh
# Installs agentao==0.5.17 from PyPI into build/hookref-venv (once) and records reference.json.
set -eu
repo=$(cd "$(dirname "$0")/../../.." && pwd)
venv="$repo/build/hookref-venv"
if ! "$venv/bin/python" -c 'import importlib.metadata as m; assert m.version("agentao") == "0.5.17"' 2>/dev/null; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet 'agentao==0.5.17'
fi
exec "$venv/bin/python" "$repo/tests/conformance/hooks/record.py"
