# The pair reader of a properties string (``name\x01value\x02`` pairs), included by the compiled
# stages that match names pair by pair: send_c (a request's properties), end_transaction_c (a
# stored half's) and timer_deliver_c (a held timer message's). Included rather than cimported: each module's copy is inlined into its own scan
# loop, where a shared inline from a .pxd cost the lone send's scan measurably.
# The including module cimports wire_facts (NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR).
from libc.string cimport memchr

# a value this long is searched on by memchr (its call costs about what a short value's bytes do)
cdef enum:
    _PAIR_SHORT = 24

cdef inline Py_ssize_t next_pair(const uint8_t* p, Py_ssize_t n, Py_ssize_t i, Py_ssize_t* kn,
                                 Py_ssize_t* vs, Py_ssize_t* vn) noexcept nogil:
    """The pair starting at ``p[i]``: its name ``p[i:i + kn]`` and value ``p[vs:vs + vn]``;
    returns where the next pair starts, or -1 when this is not a pair (an empty name, no
    name-value separator, or a second one inside the value). The end of the string closes the
    last value as a property separator would."""
    cdef Py_ssize_t ks = i, short_end
    cdef const uint8_t* stop
    while i < n and p[i] != NAME_VALUE_SEPARATOR and p[i] != PROPERTY_SEPARATOR:
        i += 1
    if i >= n or p[i] != NAME_VALUE_SEPARATOR or i == ks:
        return -1
    kn[0] = i - ks
    i += 1
    vs[0] = i
    short_end = i + _PAIR_SHORT
    while i < n and p[i] != PROPERTY_SEPARATOR:
        if p[i] == NAME_VALUE_SEPARATOR:
            return -1
        i += 1
        if i == short_end:
            # a long value (a trace message's KEYS: hundreds of ids) is searched by memchr, not a
            # byte at a time: its end, then no name-value separator before it
            stop = <const uint8_t*>memchr(p + i, PROPERTY_SEPARATOR, n - i)
            short_end = n if stop == NULL else stop - p
            if memchr(p + i, NAME_VALUE_SEPARATOR, short_end - i) != NULL:
                return -1
            i = short_end
            break
    vn[0] = i - vs[0]
    return i + 1
