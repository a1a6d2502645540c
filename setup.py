"""Build the compiled twins in fastmq/_ext/.

FASTMQ_NO_EXTENSIONS=1 skips them (pure install); otherwise a compiler error
fails the build, because a silently pure install is an order of magnitude
slower without saying so. FASTMQ_DEBUG=1 turns bounds checks, wraparound and
line tracing back on and writes Cython's annotated HTML.
"""
import glob
import os
import sys

from setuptools import setup

NO_EXTENSIONS = bool(os.environ.get("FASTMQ_NO_EXTENSIONS"))
DEBUG = bool(os.environ.get("FASTMQ_DEBUG"))
# Cython and the C compiler run once per extension, each on one core: a fresh install (CI's
# first step) waits for all of them, so they run side by side, one per core.
JOBS = os.cpu_count() or 1

ext_modules = []
if NO_EXTENSIONS:
    print("*** fastmq: building pure (FASTMQ_NO_EXTENSIONS set) ***")
else:
    from Cython.Build import cythonize
    from Cython.Compiler import Options
    from setuptools import Extension

    # A Cython warning fails the build (as `cython -Werror`), with Cython's extra warnings on: an
    # unused local was a typed loop variable that typed nothing. Locals filled through `&out`
    # start at 0, as maybe_uninitialized cannot see the call fill them. tests/test_stubs.py
    # compiles with the same flags.
    Options.warning_errors = True
    directives = {"language_level": "3", "embedsignature": True, "warn.unused": True, "warn.unreachable": True,
                  "warn.maybe_uninitialized": True}
    macros = []
    if DEBUG:
        directives.update(boundscheck=True, wraparound=True, linetrace=True)
        macros.append(("CYTHON_TRACE_NOGIL", "1"))
    # The compiled twins cimport the wire facts from a .pxd derived from fastmq/protocol's
    # declarations; rewrite it first so a changed declaration rebuilds every module using it.
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from fastmq.protocol import wire_pxd
    if wire_pxd.write():
        print(f"*** fastmq: {wire_pxd.PXD_PATH.name} regenerated from fastmq/protocol ***")
    sources = sorted(glob.glob("fastmq/_ext/*_c.pyx"))
    # The ACL check hashes with OpenSSL's SHA-1 (the libcrypto Python's own ssl and hashlib use):
    # building it needs OpenSSL's headers (libssl-dev, openssl-devel).
    libraries = {"fastmq/_ext/acl_check_c.pyx": ["crypto"]}
    extensions = [
        Extension(
            src[:-4].replace("/", "."),
            [src],
            libraries=libraries.get(src, []),
            define_macros=macros,
            extra_compile_args=["-O3"] if not DEBUG else ["-O0", "-g"],
        )
        for src in sources
    ]
    ext_modules = cythonize(extensions, compiler_directives=directives, annotate=DEBUG, nthreads=JOBS)
    print(f"*** fastmq: building accelerated ({len(ext_modules)} extensions) ***")

setup(ext_modules=ext_modules, options={"build_ext": {"parallel": JOBS}})
