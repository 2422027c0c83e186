"""A small numpy f64 renderer that carries dz/dc: escape counts, smooth offsets and the
distance estimate, straight from the contracts (tests only; shallow widths).

Counts and offsets follow the store's contract (README, "The store"); the distance is
the exterior estimate ``|z| ln|z| / |dz/dc|`` at the smooth bailout 2^10, as the vector
``conj((z / dz) ln|z|)`` (pointing away from the set in image axes, x right, y down)
divided by the pixel spacing: the ``RawFrame.distance`` convention.
"""

from __future__ import annotations

import numpy as np

from farm.color.raw import RawFrame

BAILOUT2 = 2.0**20  # |z|^2 at the smooth bailout 2^10


def pixel_grid(center: tuple[float, float], width: float, size: tuple[int, int],
               offsets: list[tuple[float, float]] | None = None) -> np.ndarray:
    """c of every pixel (H, W), or (H, W, S) at sub-pixel ``offsets`` (in pixels; the
    first (0, 0) is the pixel centre)."""
    w, h = size
    s = width / w
    cols = (np.arange(w) + 0.5 - w / 2) * s
    rows = -(np.arange(h) + 0.5 - h / 2) * s
    base = center[0] + cols[None, :] + 1j * (center[1] + rows[:, None])
    if offsets is None:
        return base
    return np.stack([base + (dx - 1j * dy) * s for dx, dy in offsets], axis=-1)


def render(c: np.ndarray, max_iter: int, spacing: float) -> RawFrame:
    """A RawFrame (with distance) of the points ``c`` (any shape), spacing in units/pixel."""
    z = np.zeros_like(c)
    dz = np.zeros_like(c)
    n = np.zeros(c.shape, np.uint32)
    steps = np.zeros(c.shape, np.int64)  # N: the step at which |z| passed 2^10
    live = np.ones(c.shape, bool)
    for k in range(1, max_iter + 40):
        if not live.any():
            break
        dz[live] = 2 * z[live] * dz[live] + 1
        z[live] = z[live] ** 2 + c[live]
        m2 = np.abs(z) ** 2
        if k <= max_iter:
            n[live & (n == 0) & (m2 > 4.0)] = k
        out = live & (n > 0) & (m2 > BAILOUT2)
        steps[out] = k
        live &= ~out
        if k >= max_iter:
            live &= n > 0  # interior: stop
    escaped = n > 0
    lnz = np.log(np.abs(z[escaped]))
    mu = steps[escaped] - np.log2(2 * lnz / np.log(BAILOUT2))
    frac = np.zeros(c.shape, np.float32)
    frac[escaped] = (mu - n[escaped]).astype(np.float32)
    dist = np.zeros(c.shape, np.complex64)
    dist[escaped] = np.conj(z[escaped] / dz[escaped] * lnz / spacing).astype(np.complex64)
    hist = np.bincount(n.ravel(), minlength=max_iter + 1).astype(np.int64)
    return RawFrame(0, n, frac, hist, dist)
