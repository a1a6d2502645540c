# The HMAC key's C-level interface for compiled modules that cimport it (produce_c signs its
# frames through :meth:`HmacKey.mac_into`, with no bytes object, method call or str in between).
cimport cython
from cpython.object cimport PyObject
from libc.stdint cimport uint64_t

cdef extern from *:
    """
    /* SHA1_Init and friends are deprecated in OpenSSL 3 in favour of EVP, whose context cannot
       be copied without an allocation; they stay in libcrypto and use the CPU's SHA extensions. */
    #ifndef OPENSSL_SUPPRESS_DEPRECATED
    #define OPENSSL_SUPPRESS_DEPRECATED 1
    #endif
    #include <openssl/sha.h>
    """
    ctypedef unsigned int SHA_LONG
    # the state is public in sha.h: the MAC closes its two hashes itself (see _close)
    ctypedef struct SHA_CTX:
        SHA_LONG h0, h1, h2, h3, h4
        SHA_LONG Nl, Nh
        SHA_LONG data[16]
        unsigned int num

cdef enum:
    BLOCK = 64
    DIGEST = 20
    B64_LEN = 28
    MAX_FIELDS = 64
    FEED_BUF = 1024  # a multiple of BLOCK
    FIRSTS = 16  # a power of two


# a first block of content seen lately and, from its second time, the inner hash's state after
# it (see _blocks)
cdef struct First:
    bint seen
    bint ready  # state holds the state after block
    unsigned char block[BLOCK]
    SHA_CTX state


# the header values are short: gathered in a buffer, with a small body and the padding, they
# reach SHA-1 in one call, not one each; SHA-1 is given whole blocks only, so nothing waits in
# the context's own buffer (a larger content goes to it in whole blocks straight from its place)
cdef struct Feed:
    SHA_CTX *c
    First *firsts  # the key's remembered first blocks
    size_t used  # bytes in buf
    uint64_t hashed  # bytes given to SHA-1 before them (after the key pad)
    unsigned char buf[FEED_BUF]


# a request's fields as its dict holds them, borrowed: no Python code runs while they are used
cdef struct Walk:
    Py_ssize_t n
    bint plain  # every key an exact str
    PyObject *keys[MAX_FIELDS]
    PyObject *values[MAX_FIELDS]


@cython.final
cdef class HmacKey:
    cdef SHA_CTX inner
    cdef SHA_CTX outer
    # the first content blocks seen lately, by a hash of the block, with the inner state after
    # them: a producer's requests begin alike (access key, group, topic, ...), so the first
    # block's compression is mostly a copy
    cdef First firsts[FIRSTS]

    cdef int mac_into(self, const char *content, size_t n, object body, char *out) except -1
    cdef void _start(self, Feed *f) noexcept
    cdef int _mac_b64(self, dict fields, object body, bint broker_side, char *out) except -1
    cdef int _mac_walked(self, dict fields, Walk *w, PyObject *entry, object body, bint broker_side,
                         char *out) except -1
    cdef int _finish(self, Feed *f, object body, char *out) except -1
    cdef bint _matches(self, dict fields, object body) except -1
    cdef bint _matches_walked(self, dict fields, Walk *w, PyObject *entry, object body) except -1
