"""The ``shade`` method in few passes: what colouring costs a CPU per frame by default.

:func:`farm.color.methods.shade_reference` is the readable composition (palette
entry, then :func:`farm.color.distance.estimated_slopes`, then
:func:`farm.color.distance.shading`, then the blend); it makes about a hundred passes
over the frame and costs 56 ms of one core per 1080p frame at best (measured on the
2-core machine; x264 spends ~138 ms encoding the frame with preset faster). This module
computes the same colours (at most 1 in 255 per channel apart, tests/test_color.py)
for frames without a stored distance (every store rendered without
``render.distance``) in about a third of the passes:

- the escape time ``mu = n + d`` is formed once, in float64, and serves both the
  palette position (its integer part and offset) and the slope field;
- the slope field is the central difference ``mu[k+1] - mu[k-1]`` (twice the
  gradient: the factor is folded into the constants), one pass per axis;
- the light is written without the distance and the unit vector: with ``g = |grad mu|``
  and ``q = relief ln 2``, the relief's slope is ``k = min(q g, 1)`` and
  ``k u.l = -q (grad mu . l) / max(q g, 1)``, so Lambert's factor over flat ground is
  ``(1 - q (grad mu . l) / (lz sqrt(max(Q, 1)))) / sqrt(1 + min(Q, 1))`` with
  ``Q = q^2 g^2``: no division by ``g``, no distance array;
- the blend ``c min(L, 1) + (255 - c) gloss max(L - 1, 0)`` is ``c a + G`` with
  ``a = min(L, 1 + gloss - gloss L)`` and ``G = 255 gloss max(L - 1, 0)``, rounded by
  adding 0.5 while converting to bytes (half up where the reference rounds half to
  even: equal but for exact halves);
- pixels next to the interior (a few percent of a frame, none in most bands) take
  the reference's one-sided differences and its formulas, on their own.

Numbers: float64 for ``mu`` and palette positions (as the reference), float32 for
slopes and light (as the reference's arrays; differences are formed in float64 and
rounded once, where the reference rounds the count's and the offset's differences
apart: the same but for float32 rounding).
"""

from __future__ import annotations

import numpy as np

from farm.color.distance import LN2
from farm.color.raw import RawFrame
from farm.color.stats import FrameStats
from farm.color.yuv import Y_GAIN, add_chroma
from farm.spec.palettes import LUT_SIZE

F32 = np.float32
_CONSTANTS: dict[tuple[float, tuple[int, ...]], np.ndarray] = {}


def const(value: float, shape: tuple[int, ...]) -> np.ndarray:
    """A read-only float32 array of ``shape`` filled with ``value`` (cached): numpy's
    maximum and minimum against an array run several times faster than against a
    scalar (measured, numpy 2.4)."""
    key = (value, shape)
    out = _CONSTANTS.get(key)
    if out is None:
        if len(_CONSTANTS) > 64:
            _CONSTANTS.clear()
        out = np.full(shape, value, F32)
        out.setflags(write=False)
        _CONSTANTS[key] = out
    return out


def positions(mu: np.ndarray, stats: FrameStats, cycles: float) -> np.ndarray:
    """Palette entry (intp, same shape as ``mu``) of each escape time by the histogram
    method: the frame's CDF times ``cycles * LUT_SIZE`` interpolated at ``mu``, taken
    mod LUT_SIZE. ``mu`` float64, >= 0 (interior pixels: any value >= 0, their entry is
    the caller's to replace). The interpolation is ``base[i] + steps[i] * mu`` with
    ``i = floor(mu)`` (:meth:`FrameStats.positions`); past the table's end, its last
    value (indices clipped to the table, whose last step is 0)."""
    _, steps, base = stats.positions(cycles)
    i = mu.astype(np.intp)  # floor: mu >= 0
    pos = np.take(base, i, mode="clip")
    step = np.take(steps, i, mode="clip")
    step *= mu
    pos += step
    idx = pos.astype(np.intp)
    idx &= LUT_SIZE - 1
    return idx


def escape_times(raw: RawFrame) -> np.ndarray:
    """``mu = n + d`` (float64, (H, W)) of a one-sample frame, at least 0 (interior
    pixels hold their offset, 0 from the kernels)."""
    mu = np.add(raw.iterations, raw.fraction, dtype=np.float64)
    if raw.fraction.size and raw.fraction.min() < -1.0:  # not from the kernels
        np.maximum(mu, 0.0, out=mu)
    return mu


def palette_entries(raw: RawFrame, stats: FrameStats, cycles: float, interior: int) -> np.ndarray:
    """The histogram method's table entry of each pixel (intp (H, W)): :func:`positions`
    of the escape time, ``interior`` for interior pixels."""
    idx = positions(escape_times(raw), stats, cycles)
    np.copyto(idx, interior, where=raw.iterations == 0)
    return idx


def double_gradient(mu: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(gx, gy)``, float32 (H, W): twice d mu / d column and twice d mu / d row
    (rows down), by central differences (one-sided at the edges: twice the step).
    NaN in ``mu`` (interior) gives NaN where it is a neighbour."""
    h, w = mu.shape
    gx = np.zeros((h, w), F32)
    gy = np.zeros((h, w), F32)
    if w >= 2:
        np.subtract(mu[:, 2:], mu[:, :-2], out=gx[:, 1:-1], casting="same_kind")
        np.subtract(mu[:, 1], mu[:, 0], out=gx[:, 0], casting="same_kind")
        np.subtract(mu[:, -1], mu[:, -2], out=gx[:, -1], casting="same_kind")
        gx[:, 0] *= 2
        gx[:, -1] *= 2
    if h >= 2:
        np.subtract(mu[2:], mu[:-2], out=gy[1:-1], casting="same_kind")
        np.subtract(mu[1], mu[0], out=gy[0], casting="same_kind")
        np.subtract(mu[-1], mu[-2], out=gy[-1], casting="same_kind")
        gy[0] *= 2
        gy[-1] *= 2
    return gx, gy


def lambert(gx: np.ndarray, gy: np.ndarray, light: tuple[float, float, float],
            relief: float) -> np.ndarray:
    """Brightness over flat ground (float32, as :func:`farm.color.distance.shading`) of
    pixels with no interior neighbour, from twice the gradient (rows down); NaN where
    ``gx`` or ``gy`` is NaN."""
    lx, ly, lz = light
    q = relief * LN2
    out = np.multiply(gx, F32(-0.5 * q * lx / lz))
    tmp = np.multiply(gy, F32(0.5 * q * ly / lz))  # y up: the row axis reversed
    out += tmp
    big = np.multiply(gx, gx)
    np.multiply(gy, gy, out=tmp)
    big += tmp
    big *= F32(0.25 * q * q)  # Q = (q |grad mu|)^2
    one = const(1.0, gx.shape)
    np.maximum(big, one, out=tmp)
    np.sqrt(tmp, out=tmp)
    out /= tmp
    out += one
    np.minimum(big, one, out=big)
    big += one
    np.sqrt(big, out=big)
    out /= big
    np.maximum(out, const(0.0, gx.shape), out=out)
    return out


def near_interior(mu: np.ndarray, flat: np.ndarray, light: tuple[float, float, float],
                  relief: float) -> np.ndarray:
    """Brightness (float32) of the pixels ``flat`` (indices into the raveled frame) that
    have an interior neighbour, by the reference (distance.estimated_slopes and
    shading): one-sided differences where a neighbour is interior (NaN in ``mu``), the
    distance at most one pixel, no slope: light from the right's direction."""
    h, w = mu.shape
    m = mu.ravel()
    col, here = flat % w, m[flat]

    def slope(step: int, has_next: np.ndarray, has_prev: np.ndarray) -> np.ndarray:
        fwd = np.where(has_next, np.take(m, flat + step, mode="clip") - here, np.nan)
        bwd = np.where(has_prev, here - np.take(m, flat - step, mode="clip"), np.nan)
        g = 0.5 * (fwd + bwd)
        lone = np.isnan(g)
        g[lone] = np.fmax(fwd, bwd)[lone]
        return np.nan_to_num(g, nan=0.0).astype(F32)

    sx = slope(1, col < w - 1, col > 0)
    sy = -slope(w, flat < (h - 1) * w, flat >= w)  # y up
    g = np.sqrt(sx * sx + sy * sy)
    flat_ground = g == 0
    inv = F32(1.0) / np.where(flat_ground, F32(1.0), g)
    length = np.where(flat_ground, F32(1.0), np.minimum(inv / F32(LN2), F32(1.0)))
    ux = np.where(flat_ground, F32(1.0), -sx * inv)
    uy = np.where(flat_ground, F32(0.0), -sy * inv)
    lx, ly, lz = (F32(v) for v in light)
    k = F32(relief) / np.maximum(length, F32(relief))
    lam = (k * (ux * lx + uy * ly) + lz) / np.sqrt(k * k + F32(1.0))
    out: np.ndarray = np.maximum(lam, F32(0.0)) / lz
    return out


def _shade_terms(raw: RawFrame, stats: FrameStats, interior: int, cycles: float,
                 light: tuple[float, float, float], relief: float, gloss: float,
                 scale: float = 255.0, offset: float = 0.5) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(idx, a, t)`` of the blend ``c a + t`` (module docstring): each pixel's palette
    entry (intp, ``interior`` for interior pixels), float32 ``a`` and float32
    ``t = scale gloss max(L - 1, 0) + offset`` (the gloss's grey, scaled to the output's
    units, plus what the output adds: 0.5 to round RGB bytes)."""
    n = raw.iterations
    mu = escape_times(raw)
    inside = n == 0
    has_inside = bool(inside.any())
    idx = positions(mu, stats, cycles)
    if has_inside:
        np.copyto(idx, interior, where=inside)
        np.copyto(mu, np.nan, where=inside)
    lam = lambert(*double_gradient(mu), light, relief)
    if has_inside:
        near = np.isnan(lam)
        np.greater(near, inside, out=near)  # NaN but not interior: next to it
        flat = np.flatnonzero(near)
        lam.ravel()[flat] = near_interior(mu, flat, light, relief)
        np.copyto(lam, F32(1.0), where=inside)  # flat ground: a = 1, G = 0, the interior colour
    # a = min(L, 1 + gloss - gloss L); t = scale gloss max(L - 1, 0) + offset
    t = np.multiply(lam, F32(gloss))
    a = np.subtract(F32(1.0 + gloss), t)
    np.minimum(a, lam, out=a)
    t *= F32(scale)
    t += F32(offset - scale * gloss)
    np.maximum(t, const(offset, t.shape), out=t)
    return idx, a, t


def shade_estimated(raw: RawFrame, stats: FrameStats, planes: np.ndarray, interior: int,
                    cycles: float, light: tuple[float, float, float], relief: float,
                    gloss: float) -> np.ndarray:
    """uint8 (H, W, 3): the ``shade`` colours of a one-sample frame without a stored
    distance. ``planes``: float32 (3, LUT_SIZE + 1), the palette's red, green and blue,
    then the interior colour at entry ``interior``."""
    h, w = raw.shape
    idx, a, t = _shade_terms(raw, stats, interior, cycles, light, relief, gloss)
    out = np.empty((h, w, 3), np.uint8)
    channel = np.empty((h, w), F32)
    for c in range(3):  # planes: long loops (an (H, W, 3) float array has inner loops of 3)
        np.take(planes[c], idx, out=channel, mode="clip")
        channel *= a
        np.add(channel, t, out=out[..., c], casting="unsafe")
    return out


def shade_i420(raw: RawFrame, stats: FrameStats, yuv: np.ndarray, interior: int,
               cycles: float, light: tuple[float, float, float], relief: float, gloss: float,
               luma: slice, chroma: slice, edges: tuple[int, int],
               out: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    """The same colours as :func:`shade_estimated`, as the video's planes
    (farm/color/yuv.py), into ``out`` = (Y, Cb, Cr) of a band of an even number of rows
    starting at an even row of the frame (uint8 (R, W'), (R/2, W'/2) twice; W' the
    even width). ``raw``: the band with the rows around it that its colours need;
    ``luma``: the band's rows in ``raw``; ``chroma``: the rows its chroma filter reads
    (:data:`farm.color.yuv.REACH` more on each side, less ``edges`` = (top, bottom)
    rows missing at the frame's edges). ``yuv``: the palette's planes converted
    (:func:`farm.color.yuv.palette_planes` of :func:`shade_estimated`'s ``planes``).

    Y, Cb and Cr are linear in the colour, so the blend ``c a + t`` becomes
    ``Y(c) a + t'`` with the palette converted once (a grey adds to Y alone): one
    palette look-up for Y where RGB takes three, no interleaved bytes. Made from the
    colours before they are rounded to bytes: within a level of converting
    :func:`shade_estimated`'s bytes."""
    y, cb, cr = out
    w = y.shape[1]
    idx, a, t = _shade_terms(raw, stats, interior, cycles, light, relief, gloss,
                             scale=255.0 * Y_GAIN, offset=16.5)
    channel = np.empty(idx[chroma, :w].shape, F32)
    part = channel[luma.start - chroma.start:luma.stop - chroma.start]
    np.take(yuv[0], idx[luma, :w], out=part, mode="clip")
    part *= a[luma, :w]
    np.add(part, t[luma, :w], out=y, casting="unsafe")
    idx, a = idx[chroma, :w], a[chroma, :w]
    for plane, target in ((yuv[1], cb), (yuv[2], cr)):
        np.take(plane, idx, out=channel, mode="clip")
        channel *= a
        add_chroma(channel, target, *edges)


__all__ = ["double_gradient", "escape_times", "lambert", "near_interior", "palette_entries", "positions",
           "shade_estimated", "shade_i420"]
