"""Colouring: histogram equalisation on the continuous escape time, smoothed over time.

For frame ``f`` with histogram ``h`` (``h[n]`` = pixels with count ``n``), the
cumulative distribution over escaped pixels is ``cdf[n] = sum(h[1..n]) / sum(h[1..])``.
A pixel with count ``n >= 1`` and smooth offset ``d`` has continuous escape time
``mu = n + d``; its palette position is ``t = cdf(mu)``, the CDF interpolated
linearly between integer counts, so colours change smoothly where ``n`` steps.
``t * cycles`` (mod 1) indexes a cyclic palette. Interior pixels (``n = 0``) are black.

Flicker: equalising each frame on its own makes colours jump whenever the count
distribution shifts from frame to frame. The CDF used for frame ``f`` is instead the
average of the CDFs of frames ``f-K .. f+K`` (``K = color.smoothing``; fewer at the
ends) with triangular weights ``K + 1 - |f - g|``. Zooming moves counts slowly, so
neighbouring CDFs are close and their average follows the zoom without jitter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from farm.color.palettes import lut


def cdf(hist: np.ndarray) -> np.ndarray:
    """Cumulative share of escaped pixels with count <= n (float64, same length).

    ``cdf[0] = 0``; a frame with no escaped pixel gives all zeros."""
    h = np.asarray(hist, dtype=np.float64).copy()
    h[0] = 0.0  # interior pixels are not part of the distribution
    total = h.sum()
    return np.cumsum(h) / total if total > 0 else np.zeros_like(h)


def smoothed_cdfs(histogram: Callable[[int], np.ndarray], frames: int,
                  radius: int) -> Iterator[np.ndarray]:
    """The averaged CDF of each frame in order; ``histogram(f)`` reads frame f's row.

    Keeps only the ``2 * radius + 1`` rows of the current window in memory."""
    window: dict[int, np.ndarray] = {}
    for f in range(frames):
        lo, hi = max(0, f - radius), min(frames - 1, f + radius)
        for g in list(window):
            if g < lo:
                del window[g]
        for g in range(lo, hi + 1):
            if g not in window:
                window[g] = cdf(histogram(g))
        weights = np.array([radius + 1 - abs(f - g) for g in range(lo, hi + 1)], dtype=np.float64)
        stack = np.stack([window[g] for g in range(lo, hi + 1)])
        yield weights @ stack / weights.sum()


def colorize(iterations: np.ndarray, fraction: np.ndarray, frame_cdf: np.ndarray,
             palette: str, cycles: float) -> np.ndarray:
    """RGB uint8 image ``(H, W, 3)`` of one frame."""
    n = iterations.astype(np.float64)
    mu = np.clip(n + fraction.astype(np.float64), 0.0, len(frame_cdf) - 1)
    t = np.interp(mu, np.arange(len(frame_cdf), dtype=np.float64), frame_cdf)
    table = lut(palette)
    idx = np.floor((t * cycles % 1.0) * len(table)).astype(np.int64) % len(table)
    rgb = table[idx]
    rgb[iterations == 0] = 0
    return rgb
