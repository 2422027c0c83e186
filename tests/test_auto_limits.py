"""max = "auto" from the frame's own escape statistics (farm/plan/prepass.py): a dense
shallow frame gets the iterations its escaping pixels need (issue 25 item 8)."""

from __future__ import annotations

import pickle

import numpy as np
from conftest import make_spec, render_frame

from farm.plan import auto_max_iter, make_plan, prepass
from farm.plan.auto_limits import with_period_limits
from farm.run.report import plan_summary

SEAHORSE = ("-0.743643887037158704752191506114774", "0.131825904205311970493132056385139")
DENSE = "6.2e-7"  # the cusp of a large minibrot: most escapes far beyond the depth rule


def _auto(size=(96, 54), width=DENSE, frames=1, **kw):
    plan = make_plan(make_spec(size=size, center=SEAHORSE, width=(width, width), frames=frames,
                               max_iter="auto", tile=(96, 54), **kw))
    return plan, with_period_limits(plan, plan.references())


def test_a_dense_shallow_frame_gets_the_iterations_its_escapes_need(cl_device):
    """At width 6.2e-7 the depth rule gave 1394 and 81% of the frame came out black
    (67% is the minibrot); the limit must let about 99% of the pixels that escape at
    all (within 2^17) escape. The pre-pass samples a 64x36 grid; the frame is 96x54,
    rendered by the kernels."""
    before, plan = _auto()
    limit = plan.frames[0].max_iter
    depth = before.frames[0].max_iter
    assert depth == auto_max_iter(np.log10(4 / 6.2e-7)) < 1400
    assert plan.frames[0].limit_rule == "escapes" and limit > 10 * depth
    deep = make_plan(make_spec(size=(96, 54), center=SEAHORSE, width=(DENSE, DENSE),
                               max_iter=1 << 17, tile=(96, 54)))
    counts, _ = render_frame(cl_device, deep)
    escaping = counts[counts > 0]
    share = float(np.mean(escaping <= limit))
    assert share >= 0.98, (limit, share)
    assert float(np.mean(escaping <= depth)) < 0.7  # what the depth rule showed
    text = plan_summary(plan, "dense.toml")
    assert f"above the depth rule by escape statistics: frames 0 (up to {limit})" in text


def test_the_limits_are_a_function_of_the_spec_and_a_fixed_max_stays():
    """The same spec gives the same limits (every machine, every MPI rank: plain
    doubles); a pickled plan (MPI) keeps them; max = <integer> is left alone."""
    _, a = _auto(size=(48, 27), width="1e-6", frames=3)
    _, b = _auto(size=(48, 27), width="1e-6", frames=3)
    assert [f.max_iter for f in a.frames] == [f.max_iter for f in b.frames]
    assert [f.max_iter for f in pickle.loads(pickle.dumps(a)).frames] == [f.max_iter for f in a.frames]
    fixed = make_plan(make_spec(size=(48, 27), center=SEAHORSE, width=(DENSE, DENSE), max_iter=1000))
    assert with_period_limits(fixed, fixed.references()) is fixed


def test_a_sparse_frame_keeps_the_depth_rule():
    """The whole set: every escape is early, the depth rule stands."""
    plan = make_plan(make_spec(size=(64, 36), center=("-0.5", "0"), width=("4", "4"),
                               max_iter="auto", tile=(64, 36)))
    assert with_period_limits(plan, None) is plan


def _scalar_count(cr: float, ci: float, r2: float, limit: int) -> int:
    """Escape count of c by z <- z^2 + c in Python floats (IEEE doubles, one rounding an
    operation, as the pre-pass promises), with the pre-pass's order of operations; 0
    if c has not escaped by ``limit``."""
    x, y, x2, y2 = cr, ci, cr * cr, ci * ci
    for n in range(1, limit + 1):
        if x2 + y2 > r2:
            return n
        tx = x + x
        y = tx * y + ci
        x = (x2 - y2) + cr
        x2, y2 = x * x, y * y
    return 0


def test_direct_counts_equal_a_scalar_loop():
    """The numpy loop's escape counts are exactly those of a scalar loop in Python
    floats: the same doubles, point by point, for two grids iterated together."""
    size, r2 = (32, 18), 4.0
    grids = [prepass.direct_grid(0, (float(SEAHORSE[0]), float(SEAHORSE[1])), size, 2e-5),
             prepass.direct_grid(1, (-0.1011, 0.9563), size, 3e-3)]
    for grid, (counts, _) in zip(grids, prepass.iterate(grids, r2), strict=True):
        top = int(counts.max())
        want = [_scalar_count(float(a), float(b), r2, top) for a, b in zip(grid.dr, grid.di, strict=True)]
        assert len(counts) > 100
        assert sorted(counts.tolist()) == sorted(n for n in want if n > 0)


def test_perturbed_grids_count_as_direct_ones():
    """The pre-pass's perturbation (rebased against the centre's orbit, as
    kernels/perturb.cl) gives the counts of direct iteration where both work."""
    from farm.numerics import period as per

    width, size = 2e-9, (64, 36)
    direct = prepass.direct_grid(0, (float(SEAHORSE[0]), float(SEAHORSE[1])), size, width)
    orbit = per.orbit(per.parse(SEAHORSE, 200), 200, 400, 4.0)  # shorter than most counts
    pert = prepass.perturbed_grid(0, (0.0, 0.0), orbit.values, size, width)
    [(a, _)], [(b, _)] = prepass.iterate([direct], 4.0), prepass.iterate([pert], 4.0)
    assert len(a) > 0.9 * direct.dr.size and abs(len(a) - len(b)) <= 0.01 * len(a)
    qa, qb = prepass.quantile_count(a), prepass.quantile_count(b)
    assert abs(qa - qb) <= 0.05 * qa, (qa, qb)
    assert abs(float(np.median(a)) - float(np.median(b))) <= 0.01 * float(np.median(a))


def test_the_grid_follows_the_pixel_mapping():
    """The coarse grid's points are the pixel centres of a coarse image of the view
    (row 0 on top), about GRID_POINTS of them, never more than the image has."""
    cols, rows = prepass.grid_shape((1920, 1080))
    assert (cols, rows) == (64, 36)
    assert prepass.grid_shape((24, 16)) == (24, 16)
    dr, di = prepass.grid_offsets((1920, 1080), 6.4)
    assert dr[0] == -3.2 + 0.05 and di[0] == 1.8 - 0.05  # top-left pixel centre
    assert np.allclose(dr.reshape(rows, cols).mean(), 0) and np.allclose(di.mean(), 0)
    assert prepass.sampled(5) == [0, 1, 2, 3, 4]
    picks = prepass.sampled(600)
    assert len(picks) == prepass.SAMPLED_FRAMES and picks[0] == 0 and picks[-1] == 599


def test_an_exponential_map_into_a_minibrot_gets_its_periods():
    """The Seahorse zoom to 1e-20 as an exponential map: its deepest frames lie by the
    period-8007 minibrot, whose pixels escape after more than a period; the depth rule
    gave them 6241 (every pixel of the deep strip came out black). Now they take the
    periods of the nucleus the same zoom finds frame by frame, and the units that
    render them the largest limit of the frames that read them."""
    from conftest import job_text

    from farm.spec import parse_text

    spec = parse_text(job_text(size=(64, 36), center=SEAHORSE, width=("4", "1e-20"), frames=200,
                               max_iter="auto", tile=(64, 36)).replace(
        "[animation]", '[animation]\nmethod = "expmap"'), name="expmap")
    before = make_plan(spec)
    plan = with_period_limits(before, before.references())
    assert before.video[-1].max_iter < 8007 < plan.video[-1].max_iter
    assert plan.video[-1].limit_rule == "periods"
    for u, unit in enumerate(plan.frames):
        readers = [plan.video[f].max_iter for f in plan.layout.frames_of_unit(u)]
        assert unit.max_iter == max(readers or [max(f.max_iter for f in plan.video)])


def test_the_pre_pass_in_helper_processes_gives_the_same_limits():
    """A render's frame-preparation helpers, started before the plan, iterate the escape
    pre-pass's grids dealt among them and this process (farm/compute/prep.py
    HelperRunner): each grid's result is its own points' alone, so the limits equal the
    one-process pre-pass's, also when a helper is gone (its group is done here)."""
    from farm.compute.prep import HelperRunner, close_helpers, spawn_helpers

    base = make_plan(make_spec(size=(64, 36), center=SEAHORSE, width=("3", "1e-9"), frames=12,
                               max_iter="auto", tile=(64, 36)))
    refs = base.references()
    want = [f.max_iter for f in with_period_limits(base, refs).frames]
    assert len(set(want)) > 3  # limits that differ frame by frame
    helpers = spawn_helpers(3)
    try:
        runner = HelperRunner(helpers)
        got = [f.max_iter for f in with_period_limits(base, refs, runner).frames]
        assert got == want and runner.helped == 3
        helpers[1]._proc.kill()
        helpers[1]._proc.wait(30)
        got = [f.max_iter for f in with_period_limits(base, refs, runner).frames]
        assert got == want and runner.helped == 5
    finally:
        close_helpers(helpers)
