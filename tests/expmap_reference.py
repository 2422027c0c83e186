"""A small numpy renderer for any set of points c, and the grids of an exponential map.

It follows the contracts of kernels/mandel.cl in float64: z(0) = 0, the count is the
first n >= 1 with |z(n)|^2 > R^2 (0: interior after max_iter), and the smooth offset
d = extra - log2(ln|z_N|^2 / ln 2^20), z iterating on until |z|^2 > 2^20 (at most 32
extra steps). Tests use it for shallow views (pixel spacing far above 1e-11), where
float64 resolves every pixel: strips, centre images and the direct frames they are
compared with then come from one arithmetic, so a comparison measures the synthesis.
"""

from __future__ import annotations

import math

import numpy as np

from farm.plan.expmap import TWO_PI, ExpmapGeometry
from farm.synth import Raster, pixel_offsets

LN_B2 = math.log(2.0**20)


def escape(c: np.ndarray, max_iter: int, r2: float = 4.0) -> tuple[np.ndarray, np.ndarray]:
    """(count uint32, smooth offset float32) of every point of the complex128 array c."""
    flat = c.ravel()
    count = np.zeros(flat.shape, np.uint32)
    frac = np.zeros(flat.shape, np.float32)
    idx = np.arange(flat.size)
    cr, ci = flat.real.copy(), flat.imag.copy()
    x = np.zeros_like(cr)
    y = np.zeros_like(ci)
    for n in range(1, max_iter + 1):
        x, y = x * x - y * y + cr, 2.0 * x * y + ci
        m2 = x * x + y * y
        out = m2 > r2
        if out.any():
            count[idx[out]] = n
            frac[idx[out]] = _smooth(x[out], y[out], cr[out], ci[out])
            keep = ~out
            idx, cr, ci, x, y = idx[keep], cr[keep], ci[keep], x[keep], y[keep]
            if idx.size == 0:
                break
    return count.reshape(c.shape), frac.reshape(c.shape)


def _smooth(x, y, cr, ci) -> np.ndarray:
    m2 = x * x + y * y
    extra = np.zeros(x.shape)
    for _ in range(32):
        go = m2 <= 1048576.0
        if not go.any():
            break
        x, y = np.where(go, x * x - y * y + cr, x), np.where(go, 2.0 * x * y + ci, y)
        m2 = np.where(go, x * x + y * y, m2)
        extra += go
    return (extra - np.log2(np.log(m2) / LN_B2)).astype(np.float32)


def frame_points(center: complex, spacing: float, width: int, height: int) -> np.ndarray:
    """c of every pixel of a flat W x H image (the DESIGN.md pixel mapping)."""
    u, v = pixel_offsets(width, height)
    return center + spacing * (u + 1j * v)


def strip_points(geom: ExpmapGeometry, center: complex, s_min: float, first: int,
                 stop: int) -> np.ndarray:
    """c of strip rows first .. stop-1, (rows, A): row g at radius s_min 2**L_g, column i
    at angle 2 pi (i + 0.5) / A."""
    g = np.arange(first, stop, dtype=np.float64)
    radius = s_min * np.exp2(geom.l_base + (g + 0.5) / geom.rows_per_octave)
    angle = TWO_PI * (np.arange(geom.angles) + 0.5) / geom.angles
    return center + radius[:, None] * np.exp(1j * angle)[None, :]


def centre_points(geom: ExpmapGeometry, center: complex, s_min: float) -> np.ndarray:
    wc, hc = geom.centre_size
    return frame_points(center, s_min / geom.centre_oversample, wc, hc)


def render_strip(geom: ExpmapGeometry, center: complex, s_min: float, max_iter: int,
                 first: int = 0, stop: int | None = None) -> Raster:
    it, fr = escape(strip_points(geom, center, s_min, first, geom.rows if stop is None else stop),
                    max_iter)
    return Raster(it, fr, first)


def render_centre(geom: ExpmapGeometry, center: complex, s_min: float, max_iter: int) -> Raster:
    it, fr = escape(centre_points(geom, center, s_min), max_iter)
    return Raster(it, fr)


def render_frame(geom: ExpmapGeometry, k: int, center: complex, s_min: float,
                 max_iter: int) -> tuple[np.ndarray, np.ndarray]:
    spacing = s_min * 2.0 ** geom.depths[k]
    return escape(frame_points(center, spacing, geom.width, geom.height), max_iter)
