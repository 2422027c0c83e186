"""Skipping against minibrot references, interior pixels and the CPU lanes, checked
against exact counts (MPFR at 200 digits, tests/reference.py).

Views: the period-8007 minibrot next to the Seahorse centre (its nucleus is the
reference; pixels take many periods; a tenth of them are interior) and the Seahorse
centre at width 1e-22 (the issue's frame, as a coarse check grid).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import compare_counts, make_spec

from farm.compute.launch import LaunchConfig
from farm.compute.render import TileRenderer
from farm.plan import make_plan

NUCLEUS_8007 = ("-0.74364388703715870475219150611477977821525620794818128981688389",
                "0.13182590420531197049313205638514067897295227932891896620912772")
SEAHORSE = ("-0.743643887037158704752191506114774", "0.131825904205311970493132056385139")
MINI = dict(center=NUCLEUS_8007, width="5e-32", size=(24, 16), max_iter=60000)
MINI_CLOSE = dict(center=NUCLEUS_8007, width="1.2e-32", size=(24, 16), max_iter=60000)
SEAHORSE_GRID = dict(center=SEAHORSE, width="1e-22", size=(32, 18), max_iter=50000)

_cache: dict = {}


def _plan(view):
    key = tuple(sorted((k, str(v)) for k, v in view.items()))
    if key not in _cache:
        plan = make_plan(make_spec(size=view["size"], center=view["center"],
                                   width=(view["width"], view["width"]), max_iter=view["max_iter"],
                                   tile=view["size"], precision="perturb"))
        _cache[key] = (plan, plan.references())
    return _cache[key]


def render(cl_device, view, config=None, **kw):
    """(iterations, fraction, steps or None) of a one-tile view."""
    plan, refs = _plan(view)
    info, dev = cl_device
    renderer = TileRenderer(dev, info, plan, config, references=refs, **kw)
    res = renderer.render(plan.frames[0], plan.grid.tile(0))
    return res.arrays["iterations"], res.arrays["fraction"], res.arrays.get("steps")


def exact(reference, view):
    return reference(view["center"], view["width"], view["size"], view["max_iter"], mpfr=True)


# the minibrot's exact counts (MPFR, 50,000 iterations a pixel) take most of a minute on two
# cores: its cases are in the slow set; the default run keeps the Seahorse grid here and the
# closer minibrot view below
@pytest.mark.parametrize("view", [pytest.param(MINI, marks=pytest.mark.slow, id="minibrot-8007"),
                                  pytest.param(SEAHORSE_GRID, id="seahorse-1e-22")])
def test_counts_with_skipping_match_exact_counts(cl_device, reference, view):
    """Skipping gets the exact count wherever the plain loop does (all but one pixel in
    500), and on 99% of the Seahorse grid; it takes many times fewer loop passes than
    iterations.

    Near the minibrot, 5 of the 384 pixels (counts near 50000: six periods along its
    edge) differ from the exact count by a few iterations with or without skipping:
    double deltas do not hold them (two plain renders against references 1e-40 apart
    disagree on 0.6% of a whole 640x360 frame there; BENCHMARKS.md)."""
    want = exact(reference, view)
    got, _, _ = render(cl_device, view)
    plain, _, _ = render(cl_device, view, skipping=False)
    floor = 0.99 if view is SEAHORSE_GRID else 0.985  # the plain loop's share, less noise
    # wrong almost only where the plain loop is: degree-4 maps (farm/numerics/
    # highdegree.py) have an error estimate, not a bound (with maps of degree 3 one
    # Seahorse pixel of the 576, exact count 16482, escaped a step early)
    assert ((got != want) & (plain == want)).mean() <= 0.002
    assert (got == plain).mean() >= floor
    compare_counts(got, want, min_equal=floor)
    _, _, steps = render(cl_device, view, count_steps=True)
    work = np.where(want == 0, view["max_iter"], want).sum()
    assert work / steps.sum() >= (20 if view is MINI else 4)


@pytest.mark.parametrize("view,share", [pytest.param(MINI, 0.15, marks=pytest.mark.slow, id="5-sizes"),
                                        pytest.param(MINI_CLOSE, 0.5, id="1.2-sizes")])
def test_no_escaping_pixel_is_declared_interior(cl_device, reference, view, share):
    """Pixels the interior test stops early (count 0) never escape in exact arithmetic,
    and the test stops many: in the view of 1.2 minibrot sizes, most pixels lie in
    the minibrot's main cardioid; in the wider one, count 0 also takes in filament
    pixels that escape beyond max_iter, which no test can stop."""
    want = exact(reference, view)
    got, _, _ = render(cl_device, view, interior=True)  # on every device (GPUs leave it out)
    interior = got == 0
    assert interior.sum() >= 50
    assert np.all(want[interior] == 0), np.argwhere(interior & (want != 0))
    _, _, with_test = render(cl_device, view, count_steps=True, interior=True)
    _, _, without = render(cl_device, view, count_steps=True, interior=False)
    early = (with_test < without) & interior
    assert early.sum() >= share * interior.sum()
    periods = view["max_iter"] // 8007
    assert with_test[early].max() <= 3 * without[early].max() / periods  # within 3 periods


@pytest.mark.parametrize("view", [MINI, SEAHORSE_GRID], ids=["minibrot-8007", "seahorse-1e-22"])
def test_lanes_give_the_one_pixel_loop_bitwise(cl_device, view):
    """kernels/perturb_lanes.cl (8 pixels in flight) against escape_pixel, both taking
    skips of 32 steps or more; and the default CPU loop against the GPU's (skips of 2
    and more) on counts."""
    lanes, frac_l, _ = render(cl_device, view, LaunchConfig(64, 4, 2048, lanes=8, min_skip_level=5))
    one, frac_1, _ = render(cl_device, view, LaunchConfig(64, 4, 2048, lanes=1, min_skip_level=5))
    assert np.array_equal(lanes, one) and np.array_equal(frac_l, frac_1)
    gpu_like, _, _ = render(cl_device, view, LaunchConfig(64, 4, 2048, lanes=1, min_skip_level=1))
    assert (gpu_like == one).mean() >= 0.99


@pytest.mark.parametrize("view", [MINI, SEAHORSE_GRID], ids=["minibrot-8007", "seahorse-1e-22"])
def test_gpu_loop_in_pixel_blocks_and_rounds_changes_nothing(cl_device, view, monkeypatch):
    """The GPU's loop (one pixel a work-item, skips from 8 steps, rounds of up to 2
    skips and 8 steps) with its pixels taken in 8 x 4 blocks (the Seahorse view's 18
    rows end in a band of 2) gives the counts, offsets and loop passes of row order,
    bitwise; and so do rounds of one skip or one step (the loop before rounds)."""
    gpu = dict(lanes=1, min_skip_level=3, interior=False)
    rows = render(cl_device, view, LaunchConfig(64, 4, 2048, **gpu), count_steps=True)
    blocks = render(cl_device, view, LaunchConfig(64, 4, 2048, pixel_blocks=True, **gpu),
                    count_steps=True)
    assert all(np.array_equal(a, b) for a, b in zip(rows, blocks, strict=True))
    assert rows[2] is not None and rows[2].min() >= 1
    monkeypatch.setenv("FARM_CL_OPTIONS", "-DSTEP_RUN=1 -DSKIP_RUN=1")
    single = render(cl_device, view, LaunchConfig(64, 4, 2048, **gpu), count_steps=True)
    assert all(np.array_equal(a, b) for a, b in zip(rows, single, strict=True))


def test_lanes_with_odd_tiles_and_idle_lanes(cl_device):
    """Fewer pixels than lanes for some work-items, a tile narrower than a vector."""
    plan = make_plan(make_spec(size=(13, 9), center=NUCLEUS_8007, width=("5e-32", "5e-32"),
                               max_iter=20000, tile=(13, 9), precision="perturb"))
    refs = plan.references()
    info, dev = cl_device
    out = []
    for lanes in (8, 1):
        r = TileRenderer(dev, info, plan, LaunchConfig(4, 1, 2048, lanes, 5), references=refs)
        out.append(r.render(plan.frames[0], plan.grid.tile(0)).arrays["iterations"])
    assert np.array_equal(*out)
