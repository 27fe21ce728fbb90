"""The queue the kernels launch on: the caller's current CUDA stream (the library's choice).

tools/bundle.py puts launch_queue_default.py in this module's place in submission.py, which the
leaderboard's server only takes when it works on the default queue alone.
"""

import torch

_raw_handle = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def current_queue(device_index: int) -> int:
    """The CUDA handle of the caller's current stream on the device (0: the legacy default stream)."""
    if _raw_handle is not None:
        return _raw_handle(device_index)
    return torch.cuda.current_stream(device_index).cuda_stream


def capturing() -> bool:
    """Whether the caller's current stream is capturing a CUDA graph (torch.cuda.graph, or any
    capture begun on it): then launches must go into that graph, with no host sync and no memory
    but the capture's own."""
    return torch.cuda.is_current_stream_capturing()
