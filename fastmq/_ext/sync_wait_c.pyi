import numpy as np
import numpy.typing as npt

__all__ = ["wait_and_sync", "TIMED_OUT", "PAST_LIMIT"]

TIMED_OUT: int
PAST_LIMIT: int

def wait_and_sync(wake_fd: int, data_fd: int, target: npt.NDArray[np.int64], limit: int, done: int,
                  timeout_ms: int) -> tuple[int, int]: ...
