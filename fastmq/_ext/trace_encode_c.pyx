# cython: boundscheck=False, wraparound=False
"""A trace dispatcher's Pub records made from its flat rows, compiled (see ``trace_encode_py``,
the reference both are tested against)."""

from .wire_facts cimport NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, PROP_KEY_SEPARATOR

__all__ = ["encode_pub_rows", "PUB_ROW"]

PUB_ROW = 12
cdef Py_ssize_t _ROW = 12
cdef dict _TYPE_TEXT = {0: "0", 1: "1", 2: "2", 3: "3"}
cdef str _NULL = "null"
# (TraceConstants' CONTENT_SPLITOR and FIELD_SPLITOR are the two property separators)
cdef str _S = chr(NAME_VALUE_SEPARATOR)
cdef str _E = chr(PROPERTY_SEPARATOR)
cdef str _KEY_SEP = (<bytes>PROP_KEY_SEPARATOR).decode("ascii")


def encode_pub_rows(rows, str trace_topic, str group, store_host):
    """The Pub records of ``rows`` and each record's keys (see ``trace_encode_py``)."""
    cdef list out = []
    cdef dict hosts = {}
    cdef list ks
    cdef Py_ssize_t i, n
    cdef long long begin, end_ms, length
    cdef object host
    if type(rows) is not list:
        rows = list(rows)
    cdef list r = <list>rows
    n = len(r)
    i = 0
    while i + _ROW <= n:
        topic = r[i + 2]
        if topic.startswith(trace_topic):
            i += _ROW
            continue
        msg_id = r[i + 3]
        tags = r[i + 4]
        keys = r[i + 5]
        region = r[i + 11]
        # (as the reference's join refuses them: a text field that is not text)
        if (type(msg_id) is not str or type(region) is not str or type(topic) is not str
                or (tags is not None and type(tags) is not str) or (keys is not None and type(keys) is not str)):
            raise TypeError("a Pub row's text field is not a str")
        begin = r[i]
        end_ms = r[i + 1]
        length = r[i + 7]
        broker = r[i + 6]
        host = hosts.get(broker)
        if host is None:
            host = store_host(broker)
            host = _NULL if host is None else str(host)
            hosts[broker] = host
        mtype = _TYPE_TEXT[r[i + 8]]
        offset_id = r[i + 9]
        offset_id = _NULL if offset_id is None else str(offset_id)
        ok = "true" if r[i + 10] == "SEND_OK" else "false"
        tags_s = _NULL if tags is None else tags
        keys_s = _NULL if keys is None else keys
        data = (f"Pub{_S}{begin}{_S}{region}{_S}{group}{_S}{topic}{_S}{msg_id}{_S}{tags_s}{_S}{keys_s}{_S}{host}"
                f"{_S}{length}{_S}{end_ms - begin}{_S}{mtype}{_S}{offset_id}{_S}{ok}{_E}")
        ks = [msg_id]
        if keys:
            for k in keys.split(_KEY_SEP):
                if k:
                    ks.append(k)
        out.append((data, ks))
        i += _ROW
    return out
