# Sourced by the two top-level scripts: make a venv and install fastmq into it
# (this compiles fastmq/_ext/*.pyx), once per change of the build inputs.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="${FASTMQ_VENV:-$ROOT/.venv}"
PY="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
    echo "fastmq: creating $VENV" >&2
    "$PY" -m venv "$VENV"
fi
stamp="$VENV/.fastmq-build-stamp"
# The build inputs: a glob with no match must not abort the script (pipefail).
inputs="$(ls pyproject.toml setup.py fastmq/_ext/*.pyx fastmq/_ext/*.pxd fastmq/_ext/*.pxi 2>/dev/null || true)"
want="$(cat $inputs | sha1sum | cut -c1-40)-${FASTMQ_NO_EXTENSIONS:-}"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "fastmq: installing into $VENV (builds the extensions)" >&2
    "$VENV/bin/python" -m pip install -q --upgrade pip >&2
    "$VENV/bin/python" -m pip install -q -e ".[test,spark]" >&2
    echo "$want" > "$stamp"
fi
export PATH="$VENV/bin:$PATH"
