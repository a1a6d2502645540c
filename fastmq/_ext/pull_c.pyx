# cython: language_level=3, embedsignature=True
"""The usual PULL_MESSAGE header in one call, compiled twin of ``pull_py`` (read that module for
the contract).

Every pull decodes one: seven numbers parsed from their text and range-checked, as Python took
several thousand instructions to do with ``int()`` per field; here each is read digit by digit
from the string's own buffer, without a ``str`` or ``int`` made in between. A consumer's pull
round reads two numbers of the answer the same way (``usual_longs``).
"""
from libc.stdint cimport INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, int64_t, uint64_t

__all__ = ["decode_pull_header", "PULL_NUMBERS", "usual_longs"]

cdef int64_t _INT_MIN = INT32_MIN
cdef int64_t _INT_MAX = INT32_MAX
cdef int64_t _LONG_MIN = INT64_MIN
cdef int64_t _LONG_MAX = INT64_MAX

PULL_NUMBERS = (("queueId", _INT_MIN, _INT_MAX), ("queueOffset", _LONG_MIN, _LONG_MAX),
                ("maxMsgNums", _INT_MIN, _INT_MAX), ("sysFlag", _INT_MIN, _INT_MAX),
                ("commitOffset", _LONG_MIN, _LONG_MAX), ("suspendTimeoutMillis", _LONG_MIN, _LONG_MAX),
                ("subVersion", _LONG_MIN, _LONG_MAX))


cdef bint _number(object v, int64_t lo, int64_t hi, int64_t* out) except -1:
    """Plain ASCII decimal text (an optional sign, 1 to 19 digits) within [lo, hi] into ``out``;
    False for anything else."""
    if type(v) is not str:
        return False
    cdef str s = <str>v
    cdef Py_ssize_t n = len(s)
    cdef Py_ssize_t i = 0
    cdef Py_UCS4 c
    cdef bint neg = False
    cdef uint64_t acc = 0
    cdef int64_t value
    if n == 0:
        return False
    c = s[0]
    if (c == 43 or c == 45) and n > 1:  # '+', '-'
        neg = c == 45
        i = 1
    if n - i > 19:
        return False
    while i < n:
        c = s[i]
        if c < 48 or c > 57:  # '0' to '9'
            return False
        acc = acc * 10 + (<uint64_t>c - 48)  # 19 digits stay below 2**64
        i += 1
    if neg:
        if acc > <uint64_t>0x8000000000000000:
            return False
        value = -<int64_t>(acc - 1) - 1 if acc else 0
    else:
        if acc > <uint64_t>INT64_MAX:
            return False
        value = <int64_t>acc
    if value < lo or value > hi:
        return False
    out[0] = value
    return True


def decode_pull_header(dict fields, cls):
    """``cls(consumerGroup, topic, the seven numbers, subscription, expressionType)`` from a pull's
    ext-fields, or None when a field is missing or not in the usual form (see ``pull_py``)."""
    group = fields.get("consumerGroup")
    topic = fields.get("topic")
    if type(group) is not str or type(topic) is not str:
        return None
    cdef int64_t qid = 0, qoff = 0, most = 0, flag = 0, commit = 0, wait = 0, subv = 0
    if not (_number(fields.get("queueId"), _INT_MIN, _INT_MAX, &qid)
            and _number(fields.get("queueOffset"), _LONG_MIN, _LONG_MAX, &qoff)
            and _number(fields.get("maxMsgNums"), _INT_MIN, _INT_MAX, &most)
            and _number(fields.get("sysFlag"), _INT_MIN, _INT_MAX, &flag)
            and _number(fields.get("commitOffset"), _LONG_MIN, _LONG_MAX, &commit)
            and _number(fields.get("suspendTimeoutMillis"), _LONG_MIN, _LONG_MAX, &wait)
            and _number(fields.get("subVersion"), _LONG_MIN, _LONG_MAX, &subv)):
        return None
    return cls(group, topic, qid, qoff, most, flag, commit, wait, subv, fields.get("subscription"),
               fields.get("expressionType"))


def usual_longs(fields, str first, str second):
    """``(fields[first], fields[second])`` as Java longs when both are in the usual form, else
    None (see ``pull_py``)."""
    if not fields or type(fields) is not dict:
        return None
    cdef int64_t a = 0, b = 0
    if not (_number((<dict>fields).get(first), _LONG_MIN, _LONG_MAX, &a)
            and _number((<dict>fields).get(second), _LONG_MIN, _LONG_MAX, &b)):
        return None
    return a, b
