"""One frame's per-pixel data as colouring takes it: the interface between the store
(or frame synthesis) and :mod:`farm.color`.

Arrays are ``(H, W)``, row 0 at the top, as in the store. ``iterations`` and
``fraction`` follow the store's contract: the escape count ``n`` (0: interior) and
the smooth offset ``d``, so the continuous escape time is ``n + d``. ``histogram``
is the frame's count histogram (``histogram[n]`` = pixels with count ``n``), the
statistic the histogram colouring is built on.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RawFrame:
    index: int  # frame number in the animation
    iterations: np.ndarray  # uint32 (H, W): escape count, 0 for interior
    fraction: np.ndarray  # float32 (H, W): smooth offset d
    histogram: np.ndarray  # int64 (N,): pixels per count

    @property
    def shape(self) -> tuple[int, int]:
        return self.iterations.shape[0], self.iterations.shape[1]
