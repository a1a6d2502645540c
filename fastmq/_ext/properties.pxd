# A message's properties, pair by pair as UTF-8, for the compiled twins that write them
# (cimported, inlined): batch_c writes them raw, produce_c escaped inside a JSON string; send_c
# and record_writer_c match the names of the pairs they read.
from cpython.dict cimport PyDict_Next
from cpython.object cimport PyObject
from libc.stdint cimport uint8_t
from libc.string cimport memchr, memcmp

from .bytebuf cimport ByteBuf
from .wire_facts cimport NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR

cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object o, Py_ssize_t *size) except NULL

#: writes one property (name and value, UTF-8) into the buffer
ctypedef int (*property_writer)(ByteBuf* b, const char* ks, Py_ssize_t kn, const char* vs,
                                Py_ssize_t vn) except -1


cdef inline bint name_is(const uint8_t* k, Py_ssize_t kn, const char* name, Py_ssize_t nn) noexcept nogil:
    """``k[:kn]`` is the property name ``name[:nn]``."""
    return kn == nn and memcmp(k, name, nn) == 0


cdef inline bint topic_char(uint8_t c) noexcept nogil:
    """A character the store takes in a topic name: ``[%|a-zA-Z0-9_-]``."""
    return ((48 <= c <= 57) or (65 <= c <= 90) or (97 <= c <= 122) or c == 37 or c == 124 or c == 95
            or c == 45)


cdef inline bint has_separator(const char* s, Py_ssize_t n) noexcept:
    return memchr(s, NAME_VALUE_SEPARATOR, n) != NULL or memchr(s, PROPERTY_SEPARATOR, n) != NULL


cdef inline int write_properties(ByteBuf* b, object props, property_writer write) except -1:
    """``write`` each property of ``props`` (a mapping; names and values not ``str`` are turned
    into one), in the mapping's order. Raises ValueError for a name or value holding a separator
    (\\x01 or \\x02): it would corrupt every property after it on the reader's side."""
    cdef Py_ssize_t pos = 0, kn = 0, vn = 0
    cdef PyObject* kp = NULL
    cdef PyObject* vp = NULL
    cdef const char* ks
    cdef const char* vs
    cdef object k, v
    if not props:
        return 0
    if type(props) is not dict:
        props = dict(props.items())
    while PyDict_Next(props, &pos, &kp, &vp):
        k = <object>kp
        v = <object>vp
        if type(k) is not str:
            k = str(k)
        if type(v) is not str:
            v = str(v)
        ks = PyUnicode_AsUTF8AndSize(k, &kn)
        vs = PyUnicode_AsUTF8AndSize(v, &vn)
        if has_separator(ks, kn) or has_separator(vs, vn):
            raise ValueError(f"property {k!r} contains a reserved separator (\\x01 or \\x02)")
        write(b, ks, kn, vs, vn)
    return 0
