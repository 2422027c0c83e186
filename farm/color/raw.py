"""One frame's per-pixel data as colouring takes it: the interface between the store
(or frame synthesis) and :mod:`farm.color`.

Arrays are ``(H, W)``, row 0 at the top, as in the store, or ``(H, W, S)`` when the
frame has ``S > 1`` samples per pixel (``[image] samples``): sample 0, the pixel centre,
first, then the samples at their sub-pixel offsets (farm/plan/samples.py); colouring
colours every sample and averages. ``iterations`` and ``fraction`` follow the store's
contract: the escape count ``n`` (0: interior) and the smooth offset ``d``, so the
continuous escape time is ``mu = n + d``. ``histogram`` is the frame's count histogram
(``histogram[n]`` = samples with count ``n``, every sample of every pixel), the
statistic the histogram colouring is built on.

``distance`` (optional, same shape, complex64) is the distance estimate in output
pixels, ``DEX + i*DEY`` = conj(z ln|z| / (s dz/dc)) (kernels/mandel.cl, README "The
store"): ``|distance|`` is the estimated distance from the sample to the set, and read
as a vector in image axes (x to the right, y down the rows) it points away from the
set. Interior samples carry 0. Stores rendered without distance estimates have
``distance = None``; :func:`farm.color.distance.estimated_slopes` then derives one from
the smooth escape time.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np


@dataclass(frozen=True)
class RawFrame:
    index: int  # frame number in the animation
    iterations: np.ndarray  # uint32 (H, W) or (H, W, S): escape count, 0 for interior
    fraction: np.ndarray  # float32, same shape: smooth offset d
    histogram: np.ndarray  # int64 (N,): samples per count 0 .. N-1 (none beyond: N may be
    #                        less than the store's row, Store.histogram(full=False))
    distance: np.ndarray | None = None  # complex64, same shape: DEX + i DEY in pixels

    @property
    def shape(self) -> tuple[int, int]:
        """(H, W) in output pixels."""
        return self.iterations.shape[0], self.iterations.shape[1]

    @property
    def samples(self) -> int:
        """Samples per pixel (1 for (H, W) arrays)."""
        return 1 if self.iterations.ndim == 2 else int(self.iterations.shape[2])

    def sample(self, s: int) -> RawFrame:
        """Sample ``s`` of every pixel as an (H, W) frame (a view, no copy)."""
        if self.iterations.ndim == 2:
            if s != 0:
                raise IndexError(f"sample {s} of a frame with one sample per pixel")
            return self
        return replace(self, iterations=self.iterations[:, :, s], fraction=self.fraction[:, :, s],
                       distance=None if self.distance is None else self.distance[:, :, s])

    def escape_time(self) -> np.ndarray:
        """``mu = n + d`` as float64 (same shape); interior pixels hold 0."""
        mu = self.iterations.astype(np.float64)
        mu += self.fraction
        mu[self.iterations == 0] = 0.0
        return mu

    def rows(self, y0: int, y1: int) -> RawFrame:
        """Rows ``y0 .. y1-1`` (a view, no copy); the histogram stays the frame's."""
        return replace(self, iterations=self.iterations[y0:y1], fraction=self.fraction[y0:y1],
                       distance=None if self.distance is None else self.distance[y0:y1])


@dataclass(frozen=True)
class PlanesFrame:
    """A frame as a compressed store holds it, for a colourer that unshuffles on the
    device (farm/compute/color.py): each channel's byte planes (uint8, zstd undone, the
    shuffle of farm/store/codec.py not), for frames of one sample a pixel stored as one
    tile (1080p and smaller, by default). ``Store.planes`` makes them; the numbers are
    those of the :class:`RawFrame` that ``Store.raw`` gives for the same frame. No
    histogram: colourers take the frame's statistics apart (farm/color/stats.py), and
    reading its row again cost every frame a second read."""

    index: int
    shape: tuple[int, int]  # (H, W) in output pixels
    iterations: np.ndarray  # uint8 (4 * H * W,): byte k of pixel i's count at [k * H * W + i]
    fraction: np.ndarray  # uint8 (4 * H * W,): the smooth offsets' planes (float32)
    distance: np.ndarray | None = None  # uint8 (8 * H * W,): the complex64 estimate's planes

    samples = 1
