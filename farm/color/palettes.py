"""Cyclic palettes as colour stops, expanded into lookup tables.

Each palette is a list of (position in [0, 1], (r, g, b)) stops whose last colour
equals the first, so ``t * cycles mod 1`` wraps without a seam.
"""

from __future__ import annotations

import functools

import numpy as np

LUT_SIZE = 4096

STOPS: dict[str, list[tuple[float, tuple[int, int, int]]]] = {
    # deep blue -> white -> gold -> dark brown -> deep blue
    "classic": [(0.0, (0, 7, 100)), (0.16, (32, 107, 203)), (0.42, (237, 255, 255)),
                (0.6425, (255, 170, 0)), (0.8575, (0, 2, 0)), (1.0, (0, 7, 100))],
    "fire": [(0.0, (20, 0, 0)), (0.3, (180, 20, 0)), (0.55, (255, 160, 0)),
             (0.75, (255, 255, 200)), (1.0, (20, 0, 0))],
    "ice": [(0.0, (0, 10, 30)), (0.35, (0, 90, 160)), (0.6, (180, 240, 255)),
            (0.8, (60, 120, 200)), (1.0, (0, 10, 30))],
    "gray": [(0.0, (0, 0, 0)), (0.5, (255, 255, 255)), (1.0, (0, 0, 0))],
}


@functools.cache
def lut(name: str) -> np.ndarray:
    """``(LUT_SIZE, 3)`` uint8 colours, linearly interpolated between stops."""
    stops = STOPS[name]
    pos = np.array([p for p, _ in stops])
    rgb = np.array([c for _, c in stops], dtype=np.float64)
    x = (np.arange(LUT_SIZE) + 0.5) / LUT_SIZE
    table = np.stack([np.interp(x, pos, rgb[:, k]) for k in range(3)], axis=1)
    out = np.rint(table).astype(np.uint8)
    out.setflags(write=False)
    return out
