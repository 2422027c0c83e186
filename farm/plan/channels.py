"""Per-pixel channels: what a tile carries from the kernel to the store.

A channel is one per-pixel quantity with a fixed dtype: the kernel writes it, the
worker sends it, the writer stores it in a dataset of that name, the reader hands it
to colouring. Every render has ``iterations`` and ``fraction`` (the store's contract);
more channels (a distance estimate, extra samples per pixel) are added by the plan
when the spec asks for them, and everything between kernel and store follows this
list, in this order.

A channel of ``depth`` d > 1 holds d values per pixel: arrays ``(h, w, d)``, stored as
``(F, H, W, d)`` chunked ``(1, th, tw, d)``; depth 1 gives ``(h, w)`` and ``(F, H, W)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Channel:
    name: str  # dataset path in the store, e.g. "iterations", "samples/fraction"
    dtype: str  # little-endian numpy dtype: "<u4", "<f4", "<c8"
    depth: int = 1  # values per pixel

    def shape(self, height: int, width: int) -> tuple[int, ...]:
        """Array shape of a ``height x width`` block of this channel."""
        return (height, width) if self.depth == 1 else (height, width, self.depth)

    def nbytes(self, pixels: int) -> int:
        return pixels * self.depth * np.dtype(self.dtype).itemsize


ITERATIONS = Channel("iterations", "<u4")  # escape count, 0: interior
FRACTION = Channel("fraction", "<f4")  # smooth offset d: continuous escape time n + d
BASE = (ITERATIONS, FRACTION)
DISTANCE = Channel("distance", "<c8")  # distance estimate DEX + i DEY in pixels (kernels/mandel.cl)


def channels_for(samples: int, distance: bool) -> tuple[Channel, ...]:
    """The channels of a render with ``samples`` per pixel, with or without the distance
    estimate, in kernel-argument order: iterations, fraction, [distance], then for
    samples 1..N-1 (sample 0, the pixel centre, is the base channels) samples/iterations,
    samples/fraction, [samples/distance], each of depth N - 1."""
    out = [*BASE, DISTANCE] if distance else list(BASE)
    if samples > 1:
        out += [Channel("samples/" + c.name, c.dtype, samples - 1) for c in out]
    return tuple(out)
