# The record writer's calls for the compiled stages that cimport them (lone_put_c): a C call,
# without the argument parsing and boxing of a Python call. Python callers see the same functions.
from .send_batch_c cimport SendBatch

cpdef object place_one(SendBatch b, object mapping, Py_ssize_t pos, Py_ssize_t file_size, long long file_from,
                       long long queue_offset, long long store_ts, object cq_mapping=*, Py_ssize_t cq_pos=*,
                       Py_ssize_t row=*)
cpdef Py_ssize_t index_records(SendBatch b, Py_ssize_t start, object mapping, Py_ssize_t slots, Py_ssize_t entries,
                               list state, long long store_ts) except -1
