# The RemotingCommand's C-level interface for compiled modules that cimport it (send_c, produce_c):
# they read a command through the inline accessors below, never its fields, so the codec may
# change its layout and keep this file as its contract.
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


cdef inline int command_code(RemotingCommand c) noexcept:
    return c._code


cdef inline int command_flag(RemotingCommand c) noexcept:
    return c._flag


cdef inline int command_opaque(RemotingCommand c) noexcept:
    return c._opaque


cdef inline int command_serialize_type(RemotingCommand c) noexcept:
    return c._serialize_type
