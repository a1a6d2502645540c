# cython: language_level=3, embedsignature=True, boundscheck=False, wraparound=False
"""The group commit's wait-then-sync, compiled twin of ``sync_wait_py`` (see it for the contract).

Waits, reads the target and syncs with the GIL released throughout, so the sync starts the
moment a requester asks, not when the event loop next lets go of the GIL.
"""
from libc.errno cimport errno, EINTR
from libc.stdint cimport int64_t, uint64_t
from libc.string cimport strerror

__all__ = ["wait_and_sync", "TIMED_OUT", "PAST_LIMIT"]

TIMED_OUT = -1
PAST_LIMIT = -2


cdef extern from "<poll.h>" nogil:
    struct pollfd:
        int fd
        short events
        short revents
    int poll(pollfd *fds, unsigned long nfds, int timeout)
    short POLLIN


cdef extern from "<time.h>" nogil:
    struct timespec:
        long tv_sec
        long tv_nsec
    int clock_gettime(int clk_id, timespec *tp)
    int CLOCK_MONOTONIC


cdef extern from "<unistd.h>" nogil:
    int fdatasync(int fd)
    ssize_t read(int fd, void *buf, size_t count)


def wait_and_sync(int wake_fd, int data_fd, int64_t[::1] target, int64_t limit, int64_t done, int timeout_ms):
    cdef pollfd p
    cdef int r
    cdef int err = 0
    cdef uint64_t count = 0
    cdef int64_t t = 0
    cdef ssize_t got
    cdef timespec a, b
    cdef long long ns = 0
    if target.shape[0] < 1:
        raise ValueError("target must hold one int64")
    p.fd = wake_fd
    p.events = POLLIN
    p.revents = 0
    with nogil:
        r = poll(&p, 1, timeout_ms)
        if r < 0:
            err = errno
        elif r > 0:
            got = read(wake_fd, &count, 8)
            if got != 8:
                err = errno
            else:
                t = target[0]  # (after the read: a requester writes the target before the eventfd)
                if t <= limit and t > done:
                    clock_gettime(CLOCK_MONOTONIC, &a)
                    if fdatasync(data_fd) != 0:
                        err = errno
                    clock_gettime(CLOCK_MONOTONIC, &b)
                    ns = (b.tv_sec - a.tv_sec) * 1000000000 + (b.tv_nsec - a.tv_nsec)
    if r < 0:
        if err == EINTR:  # a signal: as a timeout, the caller's loop comes back
            return TIMED_OUT, 0
        raise OSError(err, strerror(err).decode())
    if r == 0:
        return TIMED_OUT, 0
    if err:
        raise OSError(err, strerror(err).decode())
    if t > limit:
        return PAST_LIMIT, 0
    return t, ns
