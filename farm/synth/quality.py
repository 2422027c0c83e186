"""How close a synthesised frame is to a directly rendered one: the measures the tests
and benchmarks state.

* :func:`ssim`: the structural similarity of two 8-bit images' luma (Wang et al.
  2004: Gaussian window sigma 1.5, C1 = (0.01 * 255)^2, C2 = (0.03 * 255)^2), mean
  over the image. 1 is identical.
* :func:`calm_pixels`: pixels away from chaotic boundary pixels: in the direct render
  the pixel and its 8 neighbours escaped, and their continuous escape times differ
  from the pixel's by less than ``spread`` (default 0.5 counts). Elsewhere a point
  sample is dominated by where exactly it falls, in a direct render as well.
* :func:`agreement`: interior/exterior agreement over all pixels, and the error of
  ``mu = n + d`` on calm pixels (median, 99th percentile, max).
"""

from __future__ import annotations

import numpy as np


def luma(rgb: np.ndarray) -> np.ndarray:
    """BT.601 luma of an (H, W, 3) uint8 image, float64 in 0..255."""
    return rgb[..., 0] * 0.299 + rgb[..., 1] * 0.587 + rgb[..., 2] * 0.114


def _gauss_filter(img: np.ndarray, sigma: float = 1.5, radius: int = 5) -> np.ndarray:
    x = np.arange(-radius, radius + 1, dtype=np.float64)
    k = np.exp(-0.5 * (x / sigma) ** 2)
    k /= k.sum()
    pad = np.pad(img, radius, mode="reflect")
    rows = sum(k[i] * pad[:, i:i + img.shape[1]] for i in range(2 * radius + 1))
    return sum(k[i] * rows[i:i + img.shape[0], :] for i in range(2 * radius + 1))


def ssim(a: np.ndarray, b: np.ndarray) -> float:
    """Mean SSIM of two RGB (H, W, 3) uint8 images, on luma."""
    x, y = luma(a.astype(np.float64)), luma(b.astype(np.float64))
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    mx, my = _gauss_filter(x), _gauss_filter(y)
    sxx = _gauss_filter(x * x) - mx * mx
    syy = _gauss_filter(y * y) - my * my
    sxy = _gauss_filter(x * y) - mx * my
    s = ((2 * mx * my + c1) * (2 * sxy + c2)) / ((mx * mx + my * my + c1) * (sxx + syy + c2))
    return float(s.mean())


def continuous(iterations: np.ndarray, fraction: np.ndarray) -> np.ndarray:
    """mu = n + d as float64 (NaN for interior pixels)."""
    mu = iterations.astype(np.float64) + fraction.astype(np.float64)
    return np.where(iterations > 0, mu, np.nan)


def calm_pixels(iterations: np.ndarray, fraction: np.ndarray, spread: float = 0.5) -> np.ndarray:
    """bool (H, W): pixels whose 3x3 neighbourhood escaped with mu within ``spread``
    (the border row and column are never calm)."""
    mu = continuous(iterations, fraction)
    h, w = mu.shape
    calm = np.zeros((h, w), bool)
    centre = mu[1:-1, 1:-1]
    ok = np.isfinite(centre)
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            nb = mu[1 + dy:h - 1 + dy, 1 + dx:w - 1 + dx]
            with np.errstate(invalid="ignore"):
                ok &= np.isfinite(nb) & (np.abs(nb - centre) < spread)
    calm[1:-1, 1:-1] = ok
    return calm


def agreement(direct: tuple[np.ndarray, np.ndarray], synth: tuple[np.ndarray, np.ndarray],
              spread: float = 0.5) -> dict[str, float]:
    """Interior/exterior agreement and the mu error on calm pixels (of the direct render)."""
    (n0, d0), (n1, d1) = direct, synth
    calm = calm_pixels(n0, d0, spread)
    same_class = float(((n0 > 0) == (n1 > 0)).mean())
    err = np.abs(continuous(n0, d0) - continuous(n1, d1))[calm & (n1 > 0)]
    if err.size == 0:
        err = np.zeros(1)
    return {"class": same_class, "calm_share": float(calm.mean()),
            "calm_escaped": float((calm & (n1 > 0)).sum() / max(1, calm.sum())),
            "median": float(np.median(err)), "p99": float(np.percentile(err, 99)),
            "max": float(err.max())}
