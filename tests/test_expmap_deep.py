"""Polar tiles at depth: strip samples rendered by perturbation (kernels/perturb.cl with
-DPOLAR, double deltas and floatexp) against mpmath at the exact points the geometry
names, and the centre image against the frames method's perturbed render.

Around the Seahorse Valley Misiurewicz point of tests/test_perturb.py, zooms of one
doubling ending at width 1e-30 (double deltas) and 1e-310 (unit spacings below
1e-305: floatexp). Each strip sample (g, i) is the point
``C + s_min 2**L_g (cos theta_i + i sin theta_i)`` (farm/plan/expmap.py); mpmath
iterates it at 400 digits. At least 97% of sampled counts must match (the rest are
chaotic: their count changes with a last-bit change of the point).
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from conftest import render_frame
from reference import escape_count
from test_expmap_units import expmap_spec
from test_perturb import reference_of, seahorse_point

from farm.plan import make_plan
from farm.plan.expmap import TWO_PI
from farm.plan.units import SEGMENT

MAX_ITER = 3000


def render_units(cl_device, plan) -> list[np.ndarray]:
    """Every unit's counts, (P, A), tile by tile through the farm's renderer."""
    from farm.compute.render import TileRenderer

    info, dev = cl_device
    renderer = TileRenderer(dev, info, plan, references=reference_of(plan))
    out = []
    for unit in plan.frames:
        n = np.zeros((plan.grid.height, plan.grid.width), np.uint32)
        for tile in plan.grid:
            res = renderer.render(unit, tile)
            n[tile.y0:tile.y0 + tile.height, tile.x0:tile.x0 + tile.width] = res.iterations
        out.append(n)
    return out


def exact(x: mpmath.mpf) -> Fraction:
    man, exp = x.man_exp  # man without the sign
    value = Fraction(int(man)) * Fraction(2) ** int(exp)
    return -value if x < 0 else value


def strip_point(plan, g: int, i: int) -> tuple[Fraction, Fraction]:
    geom = plan.layout.geom
    centre = seahorse_point()
    with mpmath.workdps(420):
        radius = plan.s_min * mpmath.mpf(2) ** mpmath.mpf(geom.row_log2_radius(g))
        theta = mpmath.mpf(TWO_PI * (i + 0.5) / geom.angles)
        re = mpmath.mpf(centre[0]) + radius * mpmath.cos(theta)
        im = mpmath.mpf(centre[1]) + radius * mpmath.sin(theta)
        return exact(re), exact(im)


@pytest.mark.parametrize("width,fx", [("1e-30", False), ("1e-310", True)])
def test_polar_tiles_match_mpmath(cl_device, width, fx):
    w1 = mpmath.mpf(width)
    spec = expmap_spec(size=(48, 27), center=seahorse_point(), width=(mpmath.nstr(2 * w1, 20), width),
                       frames=31, max_iter=MAX_ITER, tile=(64, 32))
    plan = make_plan(spec)
    layout = plan.layout
    segments = [u for u, unit in enumerate(layout.units) if unit.kind == SEGMENT]
    assert all(plan.frames[u].precision == "perturb" for u in segments)
    assert (min(plan.frames[u].log10_spacing for u in segments) < -305) == fx
    units = render_units(cl_device, plan)
    rng = np.random.default_rng(7)
    p = layout.geom.rows_per_octave
    same = []
    for g in rng.choice(layout.geom.rows, 12, replace=False):
        u, r = layout.unit_of_segment(int(g) // p), int(g) % p
        for i in rng.choice(layout.geom.angles, 6, replace=False):
            want = escape_count(*strip_point(plan, int(g), int(i)), MAX_ITER, digits=400)
            same.append(units[u][r, i] == want)
    assert np.mean(same) >= 0.97, np.mean(same)
    assert any(units[u].max() > 0 for u in segments)


def test_centre_image_is_the_deepest_frame_at_twice_the_resolution(cl_device):
    """The deepest video frame's pixels fall on centre-image samples (odd size, 2x):
    its perturbed render (frames method) equals the centre image at those samples."""
    width = "1e-30"
    kw = dict(size=(48, 27), center=seahorse_point(), width=(width, width), frames=1,
              max_iter=MAX_ITER, tile=(64, 32))
    plan = make_plan(expmap_spec(**kw))
    frames_plan = make_plan(__import__("conftest").make_spec(**kw))
    layout = plan.layout
    units = render_units(cl_device, plan)
    wc, hc = layout.geom.centre_size
    centre = np.zeros((hc, wc), np.uint32)
    for u, t, piece in layout.centre_tiles():
        tile = plan.grid.tile(t)
        centre[piece.y0:piece.y0 + piece.height, piece.x0:piece.x0 + piece.width] = \
            units[u][tile.y0:tile.y0 + piece.height, tile.x0:tile.x0 + piece.width]
    direct, _ = render_frame(cl_device, frames_plan, references=reference_of(frames_plan))
    q = layout.geom.centre_oversample
    x = (q * (np.arange(48) + 0.5 - 24) + wc / 2 - 0.5).astype(int)
    y = (q * (np.arange(27) + 0.5 - 13.5) + hc / 2 - 0.5).astype(int)
    cols, rows = (x >= 0) & (x < wc), (y >= 0) & (y < hc)  # the disc of half the corner radius
    sub = centre[np.ix_(y[rows], x[cols])]
    assert math.isclose(layout.geom.centre_spacing_log2, -1.0) and sub.size >= 0.25 * 48 * 27
    assert (sub == direct[np.ix_(rows, cols)]).mean() >= 0.99
