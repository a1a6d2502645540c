# C-level view of the RemotingCommand, for compiled modules that cimport it (send_c).
cimport cython


@cython.final
cdef class RemotingCommand:
    cdef int _code
    cdef int _language
    cdef int _version
    cdef int _opaque
    cdef int _flag
    cdef public object remark
    cdef public object ext_fields
    cdef int _serialize_type
    cdef public object body
