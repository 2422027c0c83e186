"""Room in a pipe between two of the farm's processes.

A Linux pipe holds 64 kB by default. A reader of a larger message (a frame's skip
table from a preparation helper, a video frame on its way to ffmpeg) then wakes for
every 64 kB, and the writer blocks as often; each wake-up costs both sides a system
call and a switch, and a Python thread its interpreter lock. :func:`widen` raises a
pipe's size to what an unprivileged process may set by default (1 MB:
``/proc/sys/fs/pipe-max-size``). Measured on the 2-core machine: 208 skip tables of the
1080p minibrot zoom (1.9 MB each) came through two helpers in 1.42 s instead of 1.71 s;
120 640x360 frames piped to x264 took 1.20-1.21 s instead of 1.24-1.41 s (a whole
`farm encode` showed no change beyond its spread: BENCHMARKS.md, eighteenth session)."""

from __future__ import annotations

import contextlib
import fcntl

PIPE_BYTES = 1 << 20  # Linux's default most for an unprivileged process


def widen(stream) -> None:
    """Give ``stream``'s pipe PIPE_BYTES of room; where the system refuses (not Linux,
    a lower pipe-max-size, the user's pipe quota spent) it stays as it is: only slower."""
    with contextlib.suppress(AttributeError, OSError):
        fcntl.fcntl(stream.fileno(), fcntl.F_SETPIPE_SZ, PIPE_BYTES)
