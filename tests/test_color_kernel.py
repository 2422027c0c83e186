"""kernels/color.cl against the numpy colour methods: at most 1 in 255 per channel.

The kernel computes escape times and palette positions in double like numpy, and the
float32 parts (line cover, shading) in float; a different rounding of one operation
can move a palette index by one entry or a rounded byte by one, nothing more.
"""

from __future__ import annotations

import numpy as np
import pytest
import reference_de
from test_color import synthetic_frame

from farm.color import METHODS, Statistics, Style, colour
from farm.color.palettes import lut
from farm.raw import RawFrame


@pytest.fixture(scope="module")
def frames():
    """One-sample and three-sample frames with interior, from the dz/dc reference."""
    c = reference_de.pixel_grid((-0.745, 0.113), 0.01, (97, 61))
    one = reference_de.render(c, 1500, 0.01 / 97)
    offsets = [(0.0, 0.0), (0.3, -0.2), (-0.25, 0.35)]
    three = reference_de.render(reference_de.pixel_grid((-0.745, 0.113), 0.01, (53, 37), offsets),
                                1500, 0.01 / 53)
    it, fr, hist = synthetic_frame((41, 77))
    return {"one": one, "three": three, "noise": RawFrame(0, it, fr, hist)}


@pytest.fixture(scope="module")
def colourers():
    cache = {}

    def get(cl_device):
        from farm.compute.color import ClColourer

        key = cl_device[0].ref
        if key not in cache:
            cache[key] = ClColourer(*cl_device)
        return cache[key]

    return get


@pytest.mark.parametrize("method", list(METHODS))
@pytest.mark.parametrize("which,stored", [("one", True), ("one", False), ("three", True),
                                          ("three", False), ("noise", False)],
                         ids=["one-distance", "one-estimated", "three-distance", "three-estimated",
                              "noise-estimated"])
def test_kernel_matches_numpy(cl_device, colourers, frames, method, which, stored):
    raw = frames[which]
    if not stored:
        raw = RawFrame(raw.index, raw.iterations, raw.fraction, raw.histogram)
    stats = Statistics(1, 0).stats(0, lambda g: raw.histogram)
    style = Style(method=method, lut=lut("classic"), cycles=2.5, density=1.3, line_width=2.0)
    want = colour(raw, stats, style)
    got = colourers(cl_device)(raw, stats, style)
    diff = np.abs(got.astype(int) - want)
    assert diff.max() <= 1, f"{(diff > 1).sum()} channel values differ by more than 1"
    assert (diff.max(axis=2) == 0).mean() >= 0.999
