# cython: language_level=3, embedsignature=True
"""A compiled SQL92 selector run against stored records, compiled twin of ``sql_filter_py`` (read
that module for the program's form and 4.9.8's semantics, which both follow exactly).

The program's nodes, constants (UTF-8) and property names go into C arrays once. A record is
evaluated in place: one pass over its properties string finds the value (a pointer and a length
into the mapped commit log) of each property the program names, and the tree is walked over
tagged C values; no Python object is made per message. Numbers are read as Java reads them:
``Integer``/``Long.valueOf`` digit by digit, ``Double.valueOf`` through CPython's correctly
rounded ``PyOS_string_to_double`` after Java's grammar is checked. What C does not decide here
(a value with non-ASCII characters read as a number, Java's hex doubles, a value that is not
valid UTF-8 compared as a string) is handed to the pure twin for that one record, so the two
always agree.

Record layout (store format v1, big-endian): TOTALSIZE .. SYSFLAG at 36 .. the two hosts (8 or 20
bytes each, by SYSFLAG bits 0x10 and 0x20) .. BODYLEN, body, int8 topic length, topic, int16
properties length, properties.
"""
cimport cython
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.math cimport INFINITY, NAN
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t, INT32_MAX, INT32_MIN, INT64_MAX
from libc.string cimport memcmp, memcpy

from .wire_facts cimport (MESSAGE_MAGIC_CODE, NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, REC_BODYLEN_POS,
                          REC_IPV4_HOST_LEN, REC_IPV6_HOST_LEN, REC_MAGICCODE_POS, REC_SYSFLAG_POS,
                          SYSFLAG_BORNHOST_V6, SYSFLAG_HOST_V6_BITS)

from . import sql_filter_py as _py

cdef extern from "Python.h":
    double PyOS_string_to_double(const char* s, char** endptr, object overflow_exception) except? -1.0

__all__ = ["SqlProgram"]

cdef enum:
    OP_CONST = 0
    OP_PROP = 1
    OP_NEG = 2
    OP_NOT = 3
    OP_CAST = 4
    OP_AND = 5
    OP_OR = 6
    OP_EQ = 7
    OP_LT = 8
    OP_LE = 9
    OP_GT = 10
    OP_GE = 11
    OP_IN = 12
    OP_NOTIN = 13

cdef enum:
    K_NULL = 0
    K_BOOL = 1
    K_INT = 2
    K_LONG = 3
    K_DOUBLE = 4
    K_STR = 5
    K_ERROR = 6      # a conversion Java refuses: the whole evaluation fails
    K_FALLBACK = 7   # not decided here: the pure twin evaluates this record

cdef enum:
    R_FALSE = 0
    R_TRUE = 1
    R_NULL = 2
    R_ERROR = 3

cdef int _STORE_V6 = SYSFLAG_HOST_V6_BITS & ~SYSFLAG_BORNHOST_V6


cdef struct Node:
    int op
    int a
    int b


cdef struct Val:
    int kind
    int64_t i        # K_BOOL (0/1), K_INT, K_LONG
    double d         # K_DOUBLE
    const uint8_t* s # K_STR
    Py_ssize_t n


cdef struct Str:
    const uint8_t* s
    Py_ssize_t n


cdef inline int64_t _be32(const uint8_t* p) noexcept nogil:
    return <int32_t>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | <uint32_t>p[3])


cdef inline bint _ascii(const uint8_t* s, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n):
        if s[i] >= 0x80:
            return False
    return True


cdef bint _valid_utf8(const uint8_t* s, Py_ssize_t n) noexcept nogil:
    """Strict UTF-8 (no surrogates, no overlongs), as Python's decoder takes it."""
    cdef Py_ssize_t i = 0
    cdef uint8_t c, c1
    cdef int need
    while i < n:
        c = s[i]
        if c < 0x80:
            i += 1
            continue
        if 0xC2 <= c <= 0xDF:
            need = 1
        elif 0xE0 <= c <= 0xEF:
            need = 2
        elif 0xF0 <= c <= 0xF4:
            need = 3
        else:
            return False
        if i + need >= n:  # (its continuation bytes are i + 1 .. i + need)
            return False
        c1 = s[i + 1]
        if (c1 & 0xC0) != 0x80:
            return False
        if c == 0xE0 and c1 < 0xA0:
            return False
        if c == 0xED and c1 >= 0xA0:
            return False
        if c == 0xF0 and c1 < 0x90:
            return False
        if c == 0xF4 and c1 >= 0x90:
            return False
        if need >= 2 and (s[i + 2] & 0xC0) != 0x80:
            return False
        if need == 3 and (s[i + 3] & 0xC0) != 0x80:
            return False
        i += need + 1
    return True


cdef int _parse_long(const uint8_t* s, Py_ssize_t n, int64_t lo, int64_t hi, int64_t* out) noexcept nogil:
    """Java's parseInt/parseLong (radix 10): K_INT when read, K_ERROR when Java refuses, K_FALLBACK
    for non-ASCII text (Java takes any Unicode decimal digit)."""
    cdef Py_ssize_t i = 0
    cdef bint neg = False
    cdef uint64_t acc = 0
    if n == 0:
        return K_ERROR
    if not _ascii(s, n):
        return K_FALLBACK
    if s[0] == 43 or s[0] == 45:  # '+', '-'
        neg = s[0] == 45
        i = 1
        if n == 1:
            return K_ERROR
    while n - i > 19 and s[i] == 48:  # leading zeros do not count against the 19 digits
        i += 1
    if n - i > 19:
        return K_ERROR
    while i < n:
        if s[i] < 48 or s[i] > 57:
            return K_ERROR
        acc = acc * 10 + (s[i] - 48)
        i += 1
    if neg:
        if acc > <uint64_t>(-(lo + 1)) + 1:
            return K_ERROR
        out[0] = -<int64_t>(acc - 1) - 1 if acc else 0
    else:
        if acc > <uint64_t>hi:
            return K_ERROR
        out[0] = <int64_t>acc
    return K_INT



cdef int _parse_double(const uint8_t* s, Py_ssize_t n, double* out) except -1:
    """Java's Double.valueOf: K_DOUBLE, K_ERROR, or K_FALLBACK (non-ASCII, hex, very long)."""
    cdef Py_ssize_t i = 0, j = n, k, digits = 0
    cdef char buf[80]
    while i < j and s[i] <= 32:
        i += 1
    while j > i and s[j - 1] <= 32:
        j -= 1
    if not _ascii(s + i, j - i):
        return K_FALLBACK
    if i == j:
        return K_ERROR
    k = i
    if s[k] == 43 or s[k] == 45:
        k += 1
    if j - k == 3 and memcmp(s + k, b"NaN", 3) == 0:
        out[0] = NAN
        return K_DOUBLE
    if j - k == 8 and memcmp(s + k, b"Infinity", 8) == 0:
        out[0] = -INFINITY if s[i] == 45 else INFINITY
        return K_DOUBLE
    if j - k >= 2 and s[k] == 48 and (s[k + 1] == 120 or s[k + 1] == 88):  # 0x: a hex double
        return K_FALLBACK
    # [0-9]* [. [0-9]*] with a digit somewhere, [eE [+-] [0-9]+], [fFdD]
    while k < j and 48 <= s[k] <= 57:
        k += 1
        digits += 1
    if k < j and s[k] == 46:
        k += 1
        while k < j and 48 <= s[k] <= 57:
            k += 1
            digits += 1
    if digits == 0:
        return K_ERROR
    if k < j and (s[k] == 101 or s[k] == 69):
        k += 1
        if k < j and (s[k] == 43 or s[k] == 45):
            k += 1
        if k >= j or not (48 <= s[k] <= 57):
            return K_ERROR
        while k < j and 48 <= s[k] <= 57:
            k += 1
    if k < j and (s[k] == 102 or s[k] == 70 or s[k] == 100 or s[k] == 68):  # f F d D
        if k + 1 != j:
            return K_ERROR
        j = k
    elif k != j:
        return K_ERROR
    if j - i >= <Py_ssize_t>sizeof(buf):
        return K_FALLBACK
    memcpy(buf, s + i, j - i)
    buf[j - i] = 0
    out[0] = PyOS_string_to_double(buf, NULL, None)
    return K_DOUBLE


cdef inline int _dcmp(double a, double b) noexcept nogil:
    """Double.compare: NaN above all and equal to itself, -0.0 below 0.0."""
    cdef int64_t x = 0, y = 0
    if a < b:
        return -1
    if a > b:
        return 1
    if a != a:
        x = 0x7FF8000000000000
    else:
        memcpy(&x, &a, 8)
    if b != b:
        y = 0x7FF8000000000000
    else:
        memcpy(&y, &b, 8)
    return (x > y) - (x < y)


cdef inline int _icmp(int64_t a, int64_t b) noexcept nogil:
    return (a > b) - (a < b)


cdef int _str_eq(const uint8_t* a, Py_ssize_t an, const uint8_t* b, Py_ssize_t bn) noexcept nogil:
    """1 equal, 0 not, -1 undecided (bytes differ and one side is not valid UTF-8, which the pure
    twin reads with replacement characters)."""
    if an == bn and memcmp(a, b, an) == 0:
        return 1
    if (_ascii(a, an) or _valid_utf8(a, an)) and (_ascii(b, bn) or _valid_utf8(b, bn)):
        return 0
    return -1


cdef int _convert(int kind, Val* v) except -1:
    """A string value read as ``kind`` (in place): its kind afterwards, or K_ERROR / K_FALLBACK."""
    cdef int64_t x = 0
    cdef double d = 0
    cdef int r
    if kind == K_INT or kind == K_LONG:
        r = _parse_long(v.s, v.n, INT32_MIN if kind == K_INT else -INT64_MAX - 1,
                        INT32_MAX if kind == K_INT else INT64_MAX, &x)
        if r != K_INT:
            return r
        v.kind, v.i = kind, x
        return kind
    if kind == K_DOUBLE:
        r = _parse_double(v.s, v.n, &d)
        if r != K_DOUBLE:
            return r
        v.kind, v.d = K_DOUBLE, d
        return K_DOUBLE
    # Boolean.valueOf: "true" in any case
    v.i = v.n == 4 and (v.s[0] | 32) == 116 and (v.s[1] | 32) == 114 and (v.s[2] | 32) == 117 and (v.s[3] | 32) == 101
    v.kind = K_BOOL
    return K_BOOL


cdef int _compare(Val l, Val r, int* out) except -1:
    """compare_values of the pure twin: 0 with ``out`` set, or K_ERROR / K_FALLBACK."""
    cdef int c
    if l.kind != r.kind:
        if l.kind == K_BOOL:
            if r.kind == K_STR:
                return K_ERROR
            out[0] = -1
            return 0
        if l.kind == K_STR:
            c = _convert(r.kind, &l)
            if c == K_ERROR or c == K_FALLBACK:
                return c
        elif r.kind == K_STR:
            c = _convert(l.kind, &r)
            if c == K_ERROR or c == K_FALLBACK:
                return c
        elif (l.kind == K_INT or l.kind == K_LONG) and (r.kind == K_INT or r.kind == K_LONG):
            out[0] = _icmp(l.i, r.i)
            return 0
        elif l.kind == K_DOUBLE and (r.kind == K_INT or r.kind == K_LONG):
            out[0] = _dcmp(l.d, <double>r.i)
            return 0
        elif r.kind == K_DOUBLE and (l.kind == K_INT or l.kind == K_LONG):
            out[0] = _dcmp(<double>l.i, r.d)
            return 0
        else:
            out[0] = -1
            return 0
    if l.kind == K_DOUBLE:
        out[0] = _dcmp(l.d, r.d)
    elif l.kind == K_STR:
        c = _str_eq(l.s, l.n, r.s, r.n)
        if c < 0:
            return K_FALLBACK
        out[0] = 0 if c else 1
    else:
        out[0] = _icmp(l.i, r.i)
    return 0


@cython.final
cdef class SqlProgram:
    """A selector compiled for evaluation (the pure twin's constructor arguments)."""

    cdef readonly tuple nodes
    cdef readonly tuple consts
    cdef readonly tuple props
    cdef readonly tuple sets
    cdef Node* _nodes
    cdef Val* _consts
    cdef Str* _props
    cdef Str* _items          # every IN list's strings, one after another
    cdef int* _set_start      # per set: its first item in _items, and (next entry) the end
    cdef Val* _values         # per property: this record's value (K_NULL when absent)
    cdef int _n_nodes, _n_props
    cdef bint _always_py      # a constant C cannot hold as UTF-8 (lone surrogates)
    cdef list _keep           # the bytes the pointers above point into
    cdef object _py

    def __cinit__(self):
        self._nodes = NULL
        self._consts = NULL
        self._props = NULL
        self._items = NULL
        self._set_start = NULL
        self._values = NULL

    def __init__(self, nodes, consts, props, sets):
        cdef Py_ssize_t i, j, n_items = 0
        cdef bytes b
        self.nodes, self.consts, self.props, self.sets = tuple(nodes), tuple(consts), tuple(props), tuple(sets)
        self._py = _py.SqlProgram(self.nodes, self.consts, self.props, self.sets)  # (checks the form too)
        self._keep = []
        self._n_nodes = len(self.nodes)
        self._n_props = len(self.props)
        self._nodes = <Node*>PyMem_Malloc(max(1, self._n_nodes) * sizeof(Node))
        self._consts = <Val*>PyMem_Malloc(max(1, len(self.consts)) * sizeof(Val))
        self._props = <Str*>PyMem_Malloc(max(1, self._n_props) * sizeof(Str))
        self._values = <Val*>PyMem_Malloc(max(1, self._n_props) * sizeof(Val))
        for s in self.sets:
            n_items += len(s)
        self._items = <Str*>PyMem_Malloc(max(1, n_items) * sizeof(Str))
        self._set_start = <int*>PyMem_Malloc((len(self.sets) + 1) * sizeof(int))
        if (self._nodes == NULL or self._consts == NULL or self._props == NULL or self._values == NULL
                or self._items == NULL or self._set_start == NULL):
            raise MemoryError()
        for i, (op, a, bb) in enumerate(self.nodes):
            self._nodes[i].op, self._nodes[i].a, self._nodes[i].b = op, a, bb
            if not (0 <= op <= OP_NOTIN):
                raise ValueError(f"node {i}: unknown operation {op}")
            if op >= OP_NEG and op != OP_IN and op != OP_NOTIN and not (0 <= a < i):
                raise ValueError(f"node {i}: operand {a} is not an earlier node")
            if op >= OP_AND and op <= OP_GE and not (0 <= bb < i):
                raise ValueError(f"node {i}: operand {bb} is not an earlier node")
            if op == OP_CONST and not (0 <= a < len(self.consts)):
                raise ValueError(f"node {i}: no constant {a}")
            if op == OP_PROP and not (0 <= a < self._n_props):
                raise ValueError(f"node {i}: no property {a}")
            if (op == OP_IN or op == OP_NOTIN) and not (0 <= a < i and 0 <= bb < len(self.sets)):
                raise ValueError(f"node {i}: bad IN operands")
        for i, (kind, v) in enumerate(self.consts):
            self._consts[i].kind = kind
            self._consts[i].i = 0
            self._consts[i].d = 0
            self._consts[i].s = NULL
            self._consts[i].n = 0
            if kind == K_BOOL:
                self._consts[i].i = 1 if v else 0
            elif kind == K_INT or kind == K_LONG:
                self._consts[i].i = v
            elif kind == K_DOUBLE:
                self._consts[i].d = v
            elif kind == K_STR:
                b = self._utf8(v)
                self._consts[i].s = <const uint8_t*><const char*>b
                self._consts[i].n = len(b)
        for i, name in enumerate(self.props):
            b = self._utf8(name)
            self._props[i].s = <const uint8_t*><const char*>b
            self._props[i].n = len(b)
        j = 0
        for i, s in enumerate(self.sets):
            self._set_start[i] = j
            for item in sorted(s):
                b = self._utf8(item)
                self._items[j].s = <const uint8_t*><const char*>b
                self._items[j].n = len(b)
                j += 1
        self._set_start[len(self.sets)] = j

    cdef bytes _utf8(self, str text):
        cdef bytes b
        try:
            b = text.encode("utf-8")
        except UnicodeEncodeError:
            self._always_py = True
            b = b""
        self._keep.append(b)
        return b

    def __dealloc__(self):
        PyMem_Free(self._nodes)
        PyMem_Free(self._consts)
        PyMem_Free(self._props)
        PyMem_Free(self._values)
        PyMem_Free(self._items)
        PyMem_Free(self._set_start)

    def evaluate(self, const uint8_t[::1] properties):
        """TRUE, FALSE, NULL or ERROR for a message's stored properties string."""
        cdef Py_ssize_t n = properties.shape[0]
        cdef int r = self._run(&properties[0] if n else NULL, n)
        if r == K_FALLBACK:
            return self._py.evaluate(bytes(properties))
        return r

    def evaluate_dict(self, dict values):
        """Like the pure twin's (decoded properties): the pure twin answers it."""
        return self._py.evaluate_dict(values)

    def match_records(self, const uint8_t[::1] buf, int64_t base, const int64_t[::1] offs,
                      const int64_t[::1] sizes, Py_ssize_t start, uint8_t[::1] out, Py_ssize_t max_match):
        """Evaluate the records ``offs[i]`` from ``start`` on while they lie inside ``buf`` (see
        the pure twin); returns (the index after the last record evaluated, the matches)."""
        cdef Py_ssize_t n = offs.shape[0], end = buf.shape[0], i = start, found = 0
        cdef int64_t o, s
        cdef const uint8_t* p = NULL
        cdef Py_ssize_t pn, po
        cdef int r
        if sizes.shape[0] < n or out.shape[0] < n:
            raise ValueError("offs, sizes and out differ in length")
        while i < n:
            o = offs[i] - base
            s = sizes[i]
            if o < 0 or s < 0 or o + s > end:
                break
            pn = _properties_of(&buf[0], o, s, &p)
            r = self._run(p, pn)
            if r == K_FALLBACK:
                po = p - &buf[0]
                r = self._py.evaluate(bytes(buf[po:po + pn]))
            out[i] = 1 if r == R_TRUE else 0
            found += out[i]
            i += 1
            if 0 < max_match <= found:
                break
        return i, found

    cdef int _run(self, const uint8_t* p, Py_ssize_t n) except -1:
        """R_TRUE, R_FALSE, R_NULL, R_ERROR, or K_FALLBACK (the pure twin must decide)."""
        cdef Py_ssize_t i, k, start, sep
        cdef Val v
        if self._always_py:
            return K_FALLBACK
        for k in range(self._n_props):
            self._values[k].kind = K_NULL
        i = 0
        while i < n:
            start = i
            sep = -1
            while i < n and p[i] != PROPERTY_SEPARATOR:
                if sep < 0 and p[i] == NAME_VALUE_SEPARATOR:
                    sep = i
                i += 1
            if sep > start and i > sep + 1:  # (a pair with an empty name or value is skipped, as Java's)
                for k in range(self._n_props):
                    if self._props[k].n == sep - start and memcmp(self._props[k].s, p + start, sep - start) == 0:
                        self._values[k].kind = K_STR
                        self._values[k].s = p + sep + 1
                        self._values[k].n = i - sep - 1
                        break
            i += 1
        v = self._eval(self._n_nodes - 1)
        if v.kind == K_ERROR:
            return R_ERROR
        if v.kind == K_FALLBACK:
            return K_FALLBACK
        if v.kind == K_NULL:
            return R_NULL
        return R_TRUE if v.kind == K_BOOL and v.i else R_FALSE

    cdef Val _eval(self, int at) except *:
        cdef Node nd = self._nodes[at]
        cdef Val l, r, out
        cdef int c = 0, e, j
        cdef bint stop, hit
        out.kind, out.i, out.d, out.s, out.n = K_NULL, 0, 0.0, NULL, 0
        if nd.op == OP_CONST:
            return self._consts[nd.a]
        if nd.op == OP_PROP:
            return self._values[nd.a]
        if nd.op == OP_AND or nd.op == OP_OR:
            stop = nd.op == OP_OR
            l = self._eval(nd.a)
            if l.kind >= K_ERROR:
                return l
            if l.kind == K_BOOL and (l.i != 0) == stop:
                return l
            r = self._eval(nd.b)
            if r.kind >= K_ERROR:
                return r
            if r.kind == K_BOOL and (r.i != 0) == stop:
                return r
            if l.kind == K_NULL or r.kind == K_NULL:
                return out
            out.kind, out.i = K_BOOL, 0 if stop else 1
            return out
        if nd.op == OP_NOT or nd.op == OP_CAST:
            l = self._eval(nd.a)
            if l.kind >= K_ERROR or l.kind == K_NULL:
                return l
            out.kind = K_BOOL
            if nd.op == OP_NOT:
                out.i = 0 if l.i else 1
            else:
                out.i = 1 if l.kind == K_BOOL and l.i else 0
            return out
        if nd.op == OP_NEG:
            l = self._eval(nd.a)
            if l.kind >= K_ERROR:
                return l
            if l.kind == K_INT or l.kind == K_LONG:
                l.i = -l.i
                return l
            if l.kind == K_DOUBLE:
                l.d = -l.d
                return l
            return out
        if nd.op == OP_IN or nd.op == OP_NOTIN:
            l = self._eval(nd.a)
            if l.kind >= K_ERROR:
                return l
            if l.kind != K_STR:
                return out
            hit = False
            for j in range(self._set_start[nd.b], self._set_start[nd.b + 1]):
                e = _str_eq(l.s, l.n, self._items[j].s, self._items[j].n)
                if e < 0:
                    out.kind = K_FALLBACK
                    return out
                if e:
                    hit = True
                    break
            out.kind, out.i = K_BOOL, 1 if hit != (nd.op == OP_NOTIN) else 0
            return out
        l = self._eval(nd.a)
        if l.kind >= K_ERROR:
            return l
        if nd.op == OP_EQ:
            r = self._eval(nd.b)
            if r.kind >= K_ERROR:
                return r
            if l.kind == K_NULL or r.kind == K_NULL:
                if l.kind == r.kind:
                    out.kind, out.i = K_BOOL, 1
                elif r.kind == K_NULL:
                    out.kind, out.i = K_BOOL, 0
                return out
            e = _compare(l, r, &c)
            if e:
                out.kind = e
                return out
            out.kind, out.i = K_BOOL, 1 if c == 0 else 0
            return out
        if l.kind == K_NULL:
            return out
        r = self._eval(nd.b)
        if r.kind >= K_ERROR or r.kind == K_NULL:
            return r
        if l.kind == K_STR and r.kind == K_STR:
            e = _convert(K_DOUBLE, &l)
            if e == K_DOUBLE:
                e = _convert(K_DOUBLE, &r)
            if e != K_DOUBLE:
                out.kind = e
                return out
            c = _dcmp(l.d, r.d)
        else:
            e = _compare(l, r, &c)
            if e:
                out.kind = e
                return out
        out.kind = K_BOOL
        if nd.op == OP_LT:
            out.i = c < 0
        elif nd.op == OP_LE:
            out.i = c <= 0
        elif nd.op == OP_GT:
            out.i = c > 0
        else:
            out.i = c >= 0
        return out


cdef Py_ssize_t _properties_of(const uint8_t* buf, int64_t o, int64_t s, const uint8_t** out) noexcept nogil:
    """The properties string of the record at ``buf[o:o + s]``: its length, ``out`` its start
    (0 when the record is not a readable message)."""
    cdef const uint8_t* r = buf + o
    cdef int64_t p, body, sys_flag
    cdef Py_ssize_t n
    out[0] = r
    if s < REC_BODYLEN_POS + 4 or <uint32_t>_be32(r + REC_MAGICCODE_POS) != <uint32_t>MESSAGE_MAGIC_CODE:
        return 0
    sys_flag = _be32(r + REC_SYSFLAG_POS)
    p = REC_BODYLEN_POS
    if sys_flag & SYSFLAG_BORNHOST_V6:
        p += REC_IPV6_HOST_LEN - REC_IPV4_HOST_LEN
    if sys_flag & _STORE_V6:
        p += REC_IPV6_HOST_LEN - REC_IPV4_HOST_LEN
    if p + 4 > s:
        return 0
    body = _be32(r + p)
    p += 4 + body
    if body < 0 or p + 1 > s:
        return 0
    p += 1 + r[p]
    if p + 2 > s:
        return 0
    n = (r[p] << 8) | r[p + 1]
    p += 2
    if p + n > s:
        return 0
    out[0] = r + p
    return n
