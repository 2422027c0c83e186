"""Plan: frame widths, the max-iteration rule, tiles and per-frame precision."""

from __future__ import annotations

import math

import mpmath
import pytest
from conftest import make_spec

from farm.errors import SpecError
from farm.plan import TileGrid, auto_max_iter, make_plan, precision


def test_widths_log_interpolated():
    plan = make_plan(make_spec(width=("4", "1e-20"), frames=11))
    widths = [f.width for f in plan.frames]
    with mpmath.workprec(256):
        assert widths[0] == 4 and widths[-1] == mpmath.mpf("1e-20")
        ratios = [widths[k + 1] / widths[k] for k in range(10)]
        expected = mpmath.power(mpmath.mpf("1e-20") / 4, mpmath.mpf(1) / 10)
        for r in ratios:  # constant zoom speed
            assert abs(r / expected - 1) < mpmath.mpf("1e-60")


def test_single_frame_renders_first_width():
    plan = make_plan(make_spec(width=("2", "1e-5"), frames=1))
    assert len(plan.frames) == 1 and plan.frames[0].width == 2


def test_auto_max_iter_rule():
    assert auto_max_iter(0.0) == 256 and auto_max_iter(-3.0) == 256
    assert auto_max_iter(20.0) == round(256 + 64 * 20**1.5)
    values = [auto_max_iter(d / 2) for d in range(0, 200)]
    assert values == sorted(values)
    plan = make_plan(make_spec(width=("4", "1e-10"), frames=5, max_iter="auto"))
    for f in plan.frames:
        assert f.max_iter == auto_max_iter(math.log10(4 / float(f.width)))
    assert plan.bins == plan.frames[-1].max_iter + 1


@pytest.mark.parametrize("w,h,tw,th", [(24, 16, 16, 16), (100, 37, 32, 8), (5, 5, 8, 8)])
def test_tiles_cover_the_image_once(w, h, tw, th):
    grid = TileGrid(w, h, tw, th)
    cover = [[0] * w for _ in range(h)]
    for tile in grid:
        assert 0 < tile.width <= tw and 0 < tile.height <= th
        for y in range(tile.y0, tile.y0 + tile.height):
            for x in range(tile.x0, tile.x0 + tile.width):
                cover[y][x] += 1
    assert all(c == 1 for row in cover for c in row)
    assert grid.count == math.ceil(w / tw) * math.ceil(h / th)


def test_auto_precision_follows_depth():
    plan = make_plan(make_spec(width=("4", "3e-24"), frames=50, size=(64, 48)))
    fmts = [f.precision for f in plan.frames]
    order = [f for k, f in enumerate(fmts) if k == 0 or fmts[k - 1] != f]
    assert order == ["f64", "perturb"]  # each format once, cheapest first
    for f in plan.frames:
        assert precision.resolves(f.precision, f.log10_spacing)
        cheaper = precision.COST_ORDER[: precision.COST_ORDER.index(f.precision)]
        assert not any(precision.resolves(c, f.log10_spacing) for c in cheaper)


def test_explicit_precision_too_shallow_names_the_frame():
    with pytest.raises(SpecError) as exc:
        make_plan(make_spec(width=("4", "1e-20"), frames=21, precision="f64"))
    assert exc.value.field == "render.precision"
    assert "cannot resolve frame" in str(exc.value)


def test_beyond_every_format():
    """Perturbation has no fixed depth limit: only its deltas' exponent range bounds it
    (farm/plan/precision.py); 1e-3100, refused before, is planned."""
    assert make_plan(make_spec(width=("4", "1e-3100"), frames=3)).frames[-1].precision == "perturb"
    with pytest.raises(SpecError, match="beyond every format"):
        make_plan(make_spec(width=("4", "1e-90000000"), frames=3))


def test_direct_formats_in_order_when_asked_for():
    """Explicit fp128 or quad-single: each until its measured limit."""
    plan = make_plan(make_spec(width=("1e-12", "1e-23"), frames=8, size=(20, 16), precision="fp128"))
    assert {f.precision for f in plan.frames} == {"fp128"}
    with pytest.raises(SpecError, match="fp128 cannot resolve frame"):
        make_plan(make_spec(width=("1e-12", "1e-24"), frames=8, size=(64, 48), precision="fp128"))


def test_plan_pickles_exactly():
    """MPI hands the plan to workers by pickle; every frame must arrive bit for bit."""
    import pickle

    plan = make_plan(make_spec(width=("4", "1e-20"), frames=7))
    again = pickle.loads(pickle.dumps(plan))
    assert again == plan
    for a, b in zip(plan.frames, again.frames, strict=True):
        assert a.spacing.man_exp == b.spacing.man_exp and a.width.man_exp == b.width.man_exp
