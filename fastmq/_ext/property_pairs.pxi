# The pair reader of a properties string (``name\x01value\x02`` pairs), included by the compiled
# stages that match names pair by pair: send_c (a request's properties), end_transaction_c (a
# stored half's) and timer_deliver_c (a held timer message's). Included rather than cimported: each module's copy is inlined into its own scan
# loop, where a shared inline from a .pxd cost the lone send's scan measurably.
# The including module cimports wire_facts (NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR).

cdef inline Py_ssize_t next_pair(const uint8_t* p, Py_ssize_t n, Py_ssize_t i, Py_ssize_t* kn,
                                 Py_ssize_t* vs, Py_ssize_t* vn) noexcept nogil:
    """The pair starting at ``p[i]``: its name ``p[i:i + kn]`` and value ``p[vs:vs + vn]``;
    returns where the next pair starts, or -1 when this is not a pair (an empty name, no
    name-value separator, or a second one inside the value). The end of the string closes the
    last value as a property separator would."""
    cdef Py_ssize_t ks = i
    while i < n and p[i] != NAME_VALUE_SEPARATOR and p[i] != PROPERTY_SEPARATOR:
        i += 1
    if i >= n or p[i] != NAME_VALUE_SEPARATOR or i == ks:
        return -1
    kn[0] = i - ks
    i += 1
    vs[0] = i
    while i < n and p[i] != PROPERTY_SEPARATOR:
        if p[i] == NAME_VALUE_SEPARATOR:
            return -1
        i += 1
    vn[0] = i - vs[0]
    return i + 1
