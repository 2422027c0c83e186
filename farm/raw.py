"""One frame's per-pixel data as colouring takes it: the interface between the store
(or frame synthesis) and :mod:`farm.color`.

Arrays are ``(H, W)``, row 0 at the top, as in the store, or ``(H, W, S)`` when the
frame has ``S > 1`` samples per pixel (``[image] samples``): sample 0, the pixel centre,
first, then the samples at their sub-pixel offsets (farm/plan/samples.py); colouring
colours every sample and averages. ``iterations`` and ``fraction`` follow the store's
contract: the escape count ``n`` (0: interior) and the smooth offset ``d``, so the
continuous escape time is ``n + d``. ``histogram`` is the frame's count histogram
(``histogram[n]`` = samples with count ``n``, every sample of every pixel), the
statistic the histogram colouring is built on. ``distance`` is the distance estimate
``DEX + i DEY`` in output pixels (kernels/mandel.cl, README "The store"), 0 for
interior samples, or None when the render did not compute it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RawFrame:
    index: int  # frame number in the animation
    iterations: np.ndarray  # uint32 (H, W) or (H, W, S): escape count, 0 for interior
    fraction: np.ndarray  # float32, same shape: smooth offset d
    histogram: np.ndarray  # int64 (N,): samples per count
    distance: np.ndarray | None = None  # complex64, same shape: DEX + i DEY in pixels

    @property
    def shape(self) -> tuple[int, int]:
        return self.iterations.shape[0], self.iterations.shape[1]

    @property
    def samples(self) -> int:
        """Samples per pixel: 1 for (H, W) arrays, S for (H, W, S)."""
        return 1 if self.iterations.ndim == 2 else self.iterations.shape[2]
