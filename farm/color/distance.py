"""Distance to the set per pixel, for the ``distance`` and ``shade`` methods: stored, or
estimated from the smooth escape time; filament line cover; relief shading.

A frame's distance field is given as :func:`slopes`: ``(D, ux, uy)``, float32 arrays
(H, W): the distance ``D`` in output pixels and the unit direction ``(ux, uy)`` away
from the set (x right, y up, as lights are given). The stored estimate
(:mod:`farm.color.raw`) is in image axes, y down the rows: its y is negated here. Interior
pixels carry ``D = 0, u = (0, 0)``.
"""

from __future__ import annotations

import math

import numpy as np

from farm.color.raw import RawFrame

LN2 = math.log(2.0)
FAR = 1e6  # pixels: where the escape time has no measurable slope
Slopes = tuple[np.ndarray, np.ndarray, np.ndarray]


def slopes(raw: RawFrame) -> Slopes:
    """``(D, ux, uy)`` of a one-sample frame: from ``raw.distance`` when the store has
    it, else :func:`estimated_slopes`."""
    if raw.distance is None:
        return estimated_slopes(raw)
    length = np.abs(raw.distance).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = np.float32(1.0) / length
        ux = np.where(length > 0, raw.distance.real * inv, np.float32(0.0)).astype(np.float32)
        uy = np.where(length > 0, -raw.distance.imag * inv, np.float32(0.0)).astype(np.float32)
    return length, ux, uy


def estimated_slopes(raw: RawFrame) -> Slopes:
    """The distance to the set estimated from the smooth escape time alone, for stores
    without a distance estimate.

    Far from the set the continuous escape time is ``mu = N - log2 ln|z_N| + const``,
    so ``|grad mu| = |dz/dc| / (ln 2 |z| ln|z|)`` and the distance estimate
    ``|z| ln|z| / |dz/dc|`` is ``1 / (ln 2 |grad mu|)``, its direction ``-grad mu``.
    The gradient is taken by central differences on the pixel grid (one-sided at the
    edges and next to interior pixels), in float32; a pixel next to an interior pixel is
    at most one pixel from the set. No measurable slope: ``D = FAR``, ``u = (1, 0)``. Checked
    against dz/dc in tests/test_color.py (median ratio 1.00 in Seahorse Valley)."""
    inside = raw.iterations == 0
    has_inside = bool(inside.any())
    gx = _slope(raw, inside if has_inside else None, 1)
    gy = _slope(raw, inside if has_inside else None, 0)
    np.negative(gy, out=gy)  # rows go down, y goes up
    g = gx * gx
    g += gy * gy
    np.sqrt(g, out=g)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = np.divide(np.float32(1.0), g, out=g)
        flat = ~np.isfinite(inv)
        length = inv / np.float32(LN2)
        np.negative(inv, out=inv)
        ux = gx * inv
        uy = gy * inv
    if flat.any():
        length[flat], ux[flat], uy[flat] = FAR, 1.0, 0.0
    if has_inside:
        near = _touches(inside)
        np.minimum(length, 1.0, out=length, where=near)
        length[inside], ux[inside], uy[inside] = 0.0, 0.0, 0.0
    return length, ux, uy


def estimated_distance(raw: RawFrame) -> np.ndarray:
    """:func:`estimated_slopes` as a complex64 field in the :mod:`farm.color.raw` convention
    (image axes: y down)."""
    length, ux, uy = estimated_slopes(raw)
    out = np.empty(length.shape, np.complex64)
    out.real, out.imag = length * ux, -length * uy
    return out


def _slope(raw: RawFrame, inside: np.ndarray | None, axis: int) -> np.ndarray:
    """d mu / d index along ``axis`` (0: rows, 1: columns), float32 (H, W): central
    differences, one-sided at the edges and where a neighbour is interior (``inside``),
    0 where both are. Differences are taken as ``(n' - n) + (d' - d)``: exact counts and
    float32 offsets, no float64 escape time needed."""
    size = raw.iterations.shape[axis]
    out = np.zeros(raw.iterations.shape, np.float32)
    if size < 2:
        return out

    def cut(a: np.ndarray, lo: int | None, hi: int | None) -> np.ndarray:
        return a[lo:hi] if axis == 0 else a[:, lo:hi]

    n = raw.iterations.view(np.int32)  # counts < 2^31
    step = np.subtract(cut(n, 1, None), cut(n, None, -1), dtype=np.float32)
    step += cut(raw.fraction, 1, None)
    step -= cut(raw.fraction, None, -1)  # step[k] = mu[k+1] - mu[k]
    if inside is not None:
        step[cut(inside, 1, None) | cut(inside, None, -1)] = np.nan
    fwd, bwd = cut(step, 1, None), cut(step, None, -1)  # at 1 .. size-2
    middle = cut(out, 1, -1)
    np.add(fwd, bwd, out=middle)
    middle *= np.float32(0.5)
    cut(out, 0, 1)[...] = cut(step, 0, 1)
    cut(out, size - 1, size)[...] = cut(step, size - 2, size - 1)
    if inside is not None:
        bad = np.isnan(middle)
        if bad.any():
            middle[bad] = np.fmax(fwd, bwd)[bad]  # the one that is a number
        np.nan_to_num(out, copy=False, nan=0.0)
    return out


def _touches(mask: np.ndarray) -> np.ndarray:
    """Pixels with a 4-neighbour in ``mask``."""
    out = np.zeros_like(mask)
    out[1:] |= mask[:-1]
    out[:-1] |= mask[1:]
    out[:, 1:] |= mask[:, :-1]
    out[:, :-1] |= mask[:, 1:]
    return out


def line_cover(length: np.ndarray, width: float) -> np.ndarray:
    """Coverage 0..1 (float32) of a filament line ``width`` pixels wide at distance
    ``length`` pixels from the set: ``clip(width/2 + 0.5 - D, 0, 1)``; none for width 0."""
    if width <= 0:
        return np.zeros(length.shape, np.float32)
    cover = np.subtract(np.float32(width / 2 + 0.5), length, dtype=np.float32)
    return np.clip(cover, 0.0, 1.0, out=cover)


def shading(field: Slopes, light: tuple[float, float, float], relief: float) -> np.ndarray:
    """Brightness factor (float32 (H, W), 1 on flat ground) lit from the unit vector
    ``light`` (x right, y up, z towards the viewer): Lambert's cosine over the flat
    ground's. The relief ``h = relief * ln(1 / D)`` rises towards the set, with slope
    ``k = relief / max(D, relief)`` (at most 45 degrees) downhill along ``u``: steep next
    to filaments, flat in the far field, the same at every depth."""
    length, ux, uy = field
    lx, ly, lz = (np.float32(v) for v in light)
    k = np.float32(relief) / np.maximum(length, np.float32(relief))
    lambert = ux * lx
    lambert += uy * ly
    lambert *= k
    lambert += lz  # normal (k ux, k uy, 1) / sqrt(1 + k^2)
    k *= k
    k += np.float32(1.0)
    lambert /= np.sqrt(k)
    np.maximum(lambert, np.float32(0.0), out=lambert)
    lambert /= lz
    return lambert
