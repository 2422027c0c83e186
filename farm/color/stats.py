"""Per-frame statistics that colouring needs: the frame's CDF, smoothed over time.

For frame ``f`` with histogram ``h`` (``h[n]`` = pixels with count ``n``), the
cumulative distribution over escaped pixels is ``cdf[n] = sum(h[1..n]) / sum(h[1..])``.
Against flicker, the CDF used for frame ``f`` is the average of the CDFs of frames
``f-K .. f+K`` (``K = color.smoothing``; fewer at the ends of the animation) with
triangular weights ``K + 1 - |f - g|``. Zooming moves counts slowly, so neighbouring
CDFs are close and their average follows the zoom without jitter.

CDFs are kept trimmed after the frame's largest count (where they reach 1): a row of
the store is as long as the deepest frame's ``max_iter + 1`` (up to 10^7 bins), most
frames use a fraction of it. Averaging pads a shorter CDF with its last value, which
is what the full row holds there, so trimming changes no value.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from farm.spec.palettes import LUT_SIZE

LOW_QUANTILE = 0.001  # share of escaped pixels below the smooth method's origin


def last_nonzero(values: np.ndarray) -> int:
    """The index of the last entry of ``values`` that is not zero, or -1. Looks at the
    end first (a histogram row read from the store ends at or near its last count),
    in growing pieces: a whole-row scan of a 232k-entry row took 0.8 ms a frame."""
    end, piece = len(values), 512
    while end > 0:
        start = max(0, end - piece)
        nz = np.flatnonzero(values[start:end])
        if len(nz):
            return start + int(nz[-1])
        end, piece = start, piece * 8
    return -1


def cdf(hist: np.ndarray) -> np.ndarray:
    """Cumulative share of escaped pixels with count <= n (float64, same length as
    ``hist``). ``cdf[0] = 0``; a frame with no escaped pixel gives all zeros."""
    h = np.array(hist, dtype=np.float64)  # (a copy)
    h[0] = 0.0  # interior pixels are not part of the distribution
    total = h.sum()
    return np.cumsum(h) / total if total > 0 else np.zeros_like(h)


def trimmed_cdf(hist: np.ndarray) -> np.ndarray:
    """:func:`cdf` cut after the largest count present (at least 2 entries)."""
    h = np.asarray(hist)
    return cdf(h[:max(2, last_nonzero(h[1:]) + 2)])


def _pad(c: np.ndarray, length: int) -> np.ndarray:
    if len(c) >= length:
        return c
    return np.concatenate([c, np.full(length - len(c), c[-1])])


def window(f: int, frames: int, radius: int) -> range:
    """The frames whose histograms frame ``f``'s colours depend on."""
    return range(max(0, f - radius), min(frames - 1, f + radius) + 1)


def average(cdfs: dict[int, np.ndarray], f: int, radius: int) -> np.ndarray:
    """Triangular-weighted average of the CDFs of ``f``'s window (all in ``cdfs``)."""
    frames = sorted(cdfs)
    length = max(len(cdfs[g]) for g in frames)
    total = float(sum(radius + 1 - abs(f - g) for g in frames))
    out = np.zeros(length, np.float64)
    for g in frames:  # a weighted sum, not weights @ stack: that multiplication went to
        # OpenBLAS, whose threads (one per core) spin between calls: the video's colouring
        # took twice the CPU of the frames it coloured (x264 was left fewer cores)
        weight, c = (radius + 1 - abs(f - g)) / total, cdfs[g]
        out[:len(c)] += weight * c
        out[len(c):] += weight * c[-1]  # as if padded with its last value (:func:`_pad`)
    return out


@dataclass(frozen=True)
class FrameStats:
    """What every colour method may use of its frame beyond the pixels themselves."""

    index: int
    cdf: np.ndarray  # float64 (L,): smoothed CDF at integer counts 0..L-1; 1 beyond
    mu_low: float  # the count below which LOW_QUANTILE of escaped pixels lie, smoothed:
    #                the smooth method's origin
    _tables: dict[float, tuple[np.ndarray, np.ndarray, np.ndarray]] = field(
        default_factory=dict, compare=False, repr=False)

    def positions(self, cycles: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(scaled, steps, base)``, float64 (L,): the CDF times ``cycles * LUT_SIZE`` (a
        palette entry's scale), its differences ``steps[i] = scaled[i + 1] - scaled[i]``
        (0 at the end) and ``base[i] = scaled[i] - i * steps[i]``, so that the CDF
        interpolated at ``mu`` in ``[i, i + 1]`` is ``base[i] + steps[i] * mu``.
        Computed once per frame and ``cycles`` (a frame's bands share them)."""
        tables = self._tables.get(cycles)
        if tables is None:
            scaled = self.scaled(cycles)
            steps = np.zeros_like(scaled)
            steps[:-1] = np.diff(scaled)
            base = scaled - np.arange(len(scaled)) * steps
            tables = self._tables[cycles] = (scaled, steps, base)
        return tables

    def scaled(self, cycles: float) -> np.ndarray:
        """The CDF times ``cycles * LUT_SIZE``, the first of :meth:`positions` alone (all
        the OpenCL colourer takes: it interpolates on the device)."""
        return self.cdf * (cycles * LUT_SIZE)

    @classmethod
    def from_cdf(cls, index: int, smoothed: np.ndarray) -> FrameStats:
        """Statistics of a frame on its own (no neighbours)."""
        return cls(index, smoothed, quantile(smoothed, LOW_QUANTILE))


def local_linear(values: dict[int, float], f: int, radius: int) -> float:
    """The value at ``f`` of the straight line fitted to ``values`` (frame -> value) with
    the triangular weights ``radius + 1 - |f - g|``: follows a steady trend exactly, also
    at the ends of the animation where the window is one-sided, and smooths the rest."""
    g = np.array(sorted(values), np.float64)
    y = np.array([values[int(k)] for k in g])
    w = radius + 1 - np.abs(g - f)
    if len(g) < 2:
        return float(y[0])
    x = g - f
    sw, sx, sxx = w.sum(), (w * x).sum(), (w * x * x).sum()
    sy, sxy = (w * y).sum(), (w * x * y).sum()
    det = sw * sxx - sx * sx
    return float((sxx * sy - sx * sxy) / det) if det > 0 else float(sy / sw)


def quantile(c: np.ndarray, q: float) -> float:
    """The escape time ``mu`` where the piecewise-linear CDF reaches ``q`` (1.0 when the
    frame has no escaped pixel)."""
    k = int(np.searchsorted(c, q, side="left"))
    if k == 0 or k >= len(c) or c[-1] <= 0:
        return 1.0
    lo, hi = c[k - 1], c[k]
    return float(k - 1 + (q - lo) / (hi - lo)) if hi > lo else float(k)


class Statistics:
    """Smoothed per-frame statistics of an animation of ``frames`` frames, computed as
    frames become known. Each frame's CDF is computed once and kept while a window
    still needs it. Thread-safe."""

    def __init__(self, frames: int, radius: int):
        self.frames, self.radius = frames, radius
        self._cdfs: dict[int, np.ndarray] = {}
        self._lows: dict[int, float] = {}
        self._lock = threading.Lock()

    def needs(self, f: int) -> range:
        return window(f, self.frames, self.radius)

    def stats(self, f: int, histogram: Callable[[int], np.ndarray]) -> FrameStats:
        """Frame ``f``'s statistics; ``histogram(g)`` reads frame g's histogram row
        (called only for frames of the window not seen before, outside the lock, so that
        frame threads read their rows at once). The CDF is the window's weighted average;
        ``mu_low`` the local linear fit of the frames' own quantiles (the quantile of an
        averaged CDF would follow the shallowest frame)."""
        with self._lock:
            missing = [g for g in self.needs(f) if g not in self._cdfs]
        made = {g: trimmed_cdf(histogram(g)) for g in missing}
        with self._lock:
            for g, c in made.items():
                if g not in self._cdfs:
                    self._cdfs[g], self._lows[g] = c, quantile(c, LOW_QUANTILE)
            have = {g: self._cdfs[g] for g in self.needs(f)}
            lows = {g: self._lows[g] for g in have}
        return FrameStats(f, average(have, f, self.radius), local_linear(lows, f, self.radius))

    def forget_before(self, f: int) -> None:
        """Drop CDFs that no window of frame ``f`` or later needs."""
        with self._lock:
            for g in [g for g in self._cdfs if g < f - self.radius]:
                del self._cdfs[g], self._lows[g]


def smoothed_cdfs(histogram: Callable[[int], np.ndarray], frames: int,
                  radius: int) -> Iterator[np.ndarray]:
    """The averaged CDF of each frame in order, full length (as the store's rows);
    ``histogram(f)`` reads frame f's row. Keeps ``2 * radius + 1`` rows in memory."""
    stats = Statistics(frames, radius)
    full = len(histogram(0)) if frames else 0
    for f in range(frames):
        yield _pad(stats.stats(f, histogram).cdf, full)[:full]
        stats.forget_before(f + 1)
