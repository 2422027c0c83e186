"""Colouring: CDFs, temporal smoothing, palettes."""

from __future__ import annotations

import numpy as np

from farm.color import cdf, colorize, smoothed_cdfs
from farm.color.palettes import STOPS, lut


def test_cdf_over_escaped_pixels():
    h = np.array([100, 1, 2, 3, 0, 4])  # 100 interior pixels are ignored
    c = cdf(h)
    assert c[0] == 0 and c[-1] == 1 and np.all(np.diff(c) >= 0)
    assert np.isclose(c[3], 6 / 10)
    assert not cdf(np.array([5, 0, 0])).any()  # nothing escaped


def test_smoothing_is_a_weighted_average_and_reduces_flicker():
    rng = np.random.default_rng(0)
    base = np.exp(-np.arange(200) / 40.0)
    hists = [np.concatenate([[50], rng.poisson(1000 * base[1:] * rng.uniform(0.5, 1.5))])
             for _ in range(30)]
    raw = [cdf(h) for h in hists]
    none = list(smoothed_cdfs(lambda f: hists[f], 30, 0))
    assert all(np.allclose(a, b) for a, b in zip(none, raw, strict=True))
    smooth = list(smoothed_cdfs(lambda f: hists[f], 30, 3))
    f = 10
    weights = np.array([4 - abs(k) for k in range(-3, 4)], float)
    expected = sum(w * raw[f + k] for w, k in zip(weights, range(-3, 4), strict=True)) / weights.sum()
    assert np.allclose(smooth[f], expected)

    def flicker(cdfs):
        return np.mean([np.abs(cdfs[k + 1] - cdfs[k]).max() for k in range(len(cdfs) - 1)])

    assert flicker(smooth) < 0.5 * flicker(raw)


def test_colorize_interior_black_and_continuous():
    it = np.array([[0, 1, 2, 3, 4]], np.uint32)
    fr = np.zeros_like(it, dtype=np.float32)
    c = cdf(np.array([1, 1, 1, 1, 1]))
    rgb = colorize(it, fr, c, "classic", 1.0)
    assert rgb.shape == (1, 5, 3) and rgb.dtype == np.uint8
    assert (rgb[0, 0] == 0).all() and rgb[0, 1:].any()
    # continuous mu: pixels at n=2, d=-0.5 and n=1, d=+0.5 get the same colour
    same = colorize(np.array([[2, 1]], np.uint32), np.array([[-0.5, 0.5]], np.float32), c, "fire", 1.0)
    assert (same[0, 0] == same[0, 1]).all()


def test_palettes_are_cyclic():
    for name in STOPS:
        table = lut(name).astype(int)
        assert np.abs(table[0] - table[-1]).max() <= 8, name
        assert np.abs(np.diff(table, axis=0)).max() <= 8, name  # no jumps inside either
