"""``max = "auto"`` iteration limits raised past the depth rule (farm/plan/__init__.py
auto_max_iter) where a frame needs more: to a few periods of the frame's nucleus
reference (near a minibrot of period p every pixel's count exceeds p, whatever the
depth), then to the frame's own escape statistics (farm/plan/prepass.py).
:func:`with_period_limits` gives the plan with them; each frame's ``limit_rule`` says
which rule set its limit.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from farm.plan.reference_orbits import center_reference, escape_r2
from farm.plan.reference_types import Reference, References

AUTO_PERIODS = 4  # max = "auto": at least this many periods of a frame's nucleus reference


def log2_copy_scale(ref: Reference) -> float:
    """log2 |lambda' beta| of a nucleus reference: near the minibrot one period takes a
    pixel c to w -> w^2 + c' with c' = lambda' beta (c - nucleus), beta = dz_p/dc at
    the nucleus, so this scales c - nucleus to the minibrot's own coordinates (where
    it is a copy of the whole set, of radius about 2). beta = lambda' sum_{k=0}^{p-1}
    1 / prod_{j=1}^{k} 2 Z(j) (the derivative's recurrence b <- 2 Z b + 1 unrolled),
    summed with logarithms: an estimate in doubles at any depth."""
    mant, exps = ref.points.mant[1:ref.period], ref.points.exps[1:ref.period]
    z = mant[:, 0] + 1j * mant[:, 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        log_2z = np.log(2.0 * z) + exps * math.log(2.0)  # log 2 Z(j), Z(j) at any depth
        logs = np.concatenate([[0.0], -np.cumsum(log_2z)])  # -log prod_{j<=k} 2 Z(j)
        top = logs.real.max()
        total = abs(np.exp(logs - top).sum())
    if not (math.isfinite(top) and total > 0):  # a Z(j) = 0 in doubles: lambda' alone
        return 2.0 * ref.log2_scale
    return 2.0 * ref.log2_scale + (top + math.log(total)) / math.log(2.0)


def auto_periods(log2_lam: float, log2_reach: float) -> float:
    """Periods of iterations that ``max = "auto"`` gives a frame whose farthest pixel
    lies 2^log2_reach from the nucleus in the minibrot's own coordinates (log2_lam:
    log2 |lambda'|).

    A pixel at c' (|c'| > 2) leaves the minibrot's neighbourhood when its w = lambda' z
    reaches about lambda', and each period squares w: about 1 + log2(log2|lambda'| /
    log2|c'|) periods. Pixels near the minibrot's edge take more, as the whole set's
    edge takes many iterations: a term 64 / log2(reach)^2 gives frames that show the
    minibrot more. Measured around the period-8007 nucleus near the Seahorse centre
    (log2 lambda' = 50.3; frames of 192x108 centred on it at widths 1e-26 to 2e-31,
    max 60 p), the escaping pixels' counts, in periods, at reach 2^19.3, 2^12.6,
    2^9.3, 2^6.0 and 2^3.7 (a half diagonal): 99th percentile 2.4, 3.3, 4.2, 5.3 and
    8.2, 99.9th 2.9, 3.8, 4.8, 7.1 and 23; this gives 5.2, 6.4, 7.4, 9.4 and 13.4 (at
    least AUTO_PERIODS; a reach below 2 counts as 2). At width 5e-32 (reach 2^1.7, the
    minibrot a fifth of the frame's width) it gives 32; benchmarks/skipping.py takes
    25 there, where 9.9% of the 1080p frame stays interior (a copy of the set at that
    scale would cover about 8.6%: its edge takes more still)."""
    reach = max(log2_reach, 1.0)
    ratio = max(log2_lam, 1.0) / reach
    if ratio <= 1:
        return float(AUTO_PERIODS)
    return max(float(AUTO_PERIODS), 3.0 + 1.5 * math.log2(ratio) + 64.0 / reach**2)


def with_period_limits(plan, refs: References | None, runner=None):
    """The plan with ``max = "auto"`` raised in the frames that need more than the
    depth rule (the same plan object where nothing is raised): first to enough
    periods of the frame's nucleus reference (:func:`period_limits`), then to the
    frame's own escape statistics (:mod:`farm.plan.prepass`). Each frame's
    ``limit_rule`` says which rule set its limit. An exponential map takes the escape
    statistics of its video frames, and each unit the largest limit of the frames
    that read it (farm/plan/units.py). ``runner`` iterates the pre-pass's grids in other
    processes (:func:`farm.plan.prepass.escape_limits`; the same limits)."""
    if plan.spec.iterations.max != "auto":
        return plan
    from farm.plan import prepass

    w, h = plan.spec.size
    r2 = escape_r2(plan)
    if plan.layout is not None:
        video = plan.video
        periods = _expmap_period_limits(plan)
        floors = [max(f.max_iter, p) for f, p in zip(video, periods, strict=True)]
        by_period = {i for i, f in enumerate(video) if periods[i] > f.max_iter}
        limits = prepass.frame_limits(video, (w, h), r2, floors, _grid_maker(plan, refs, by_period),
                                      runner)
        if limits == floors:
            return plan
        from farm.plan import make_plan

        raised = make_plan(plan.spec, stored_video=limits)
        video = tuple(replace(f, limit_rule="escapes" if f.max_iter > floor else
                              "periods" if i in by_period else "depth")
                      for i, (f, floor) in enumerate(zip(raised.video, floors, strict=True)))
        return replace(raised, video=video)
    periods = period_limits(plan, refs)
    floors = [max(f.max_iter, periods[i]) for i, f in enumerate(plan.frames)]
    # frames whose nucleus sets the limit: auto_periods is the escape statistic there
    by_period = {i for i, f in enumerate(plan.frames) if periods[i] > f.max_iter}
    limits = prepass.frame_limits(plan.frames, (w, h), r2, floors, _grid_maker(plan, refs, by_period),
                                  runner)
    frames = [f if limit == f.max_iter else
              replace(f, max_iter=limit, limit_rule="escapes" if limit > floor else "periods")
              for f, floor, limit in zip(plan.frames, floors, limits, strict=True)]
    return plan if frames == list(plan.frames) else replace(plan, frames=tuple(frames))


def _expmap_period_limits(plan) -> list[int]:
    """:func:`period_limits` of an exponential map's video frames: those of the same
    zoom rendered frame by frame, whose references are nuclei where the zoom nears a
    minibrot (the map's own reference is the view centre: its polar tiles measure
    offsets from it). The frames' nuclei serve only to decide the limits."""
    from farm.plan import make_plan

    spec = plan.spec
    twin = make_plan(replace(spec, animation=replace(spec.animation, method="frames")))
    return period_limits(twin, twin.references())


def _grid_maker(plan, refs: References | None, skip: set[int]):
    """``grid_of(i, width)`` for :func:`farm.plan.prepass.frame_limits`: frame i's
    coarse grid, iterated directly where doubles resolve it, else against the frame's
    reference (expmap: the centre's; frames without one, the centre's orbit computed
    here); None for the frames in ``skip`` and below double's range."""
    import farm.numerics as num
    from farm.numerics import period as per
    from farm.plan import prepass

    center = plan.spec.view.center
    size = plan.spec.size
    frames = plan.video_frames
    own: dict[str, Reference] = {}

    def reference(i: int) -> Reference:
        if refs is not None:
            k = 0 if plan.layout is not None else refs.frame_ref[i]
            if k >= 0:
                return refs.refs[k]
        if "centre" not in own:
            frame = frames[i]
            own["centre"] = center_reference(center, frame.bits, min(frame.max_iter, 1 << 14), plan)
        return own["centre"]

    def grid_of(i: int, width: float):
        if i in skip:
            return None
        cols, _ = prepass.grid_shape(size)
        log10_step = frames[i].log10_spacing + math.log10(size[0] / cols)
        turn = num.rotation_doubles(frames[i].angle)
        if log10_step >= math.log10(prepass.DIRECT_MIN_SPACING):
            return prepass.direct_grid(i, (float(center[0]), float(center[1])), size, width, turn)
        if log10_step < prepass.MIN_LOG10_SPACING:
            return None
        ref = reference(i)
        offset = per.offset_in(center, ref.point, 1.0, 0, ref.point.bits)
        return prepass.perturbed_grid(i, offset, ref.orbit, size, width, turn)  # ref.orbit: doubles

    return grid_of


def period_limits(plan, refs: References | None) -> list[int]:
    """Per frame: the iterations ``max = "auto"`` gives it for its nucleus reference
    of period p (``auto_periods`` periods; 0 where its reference is not a nucleus).

    Near a minibrot of period p a pixel follows the nucleus' orbit for about a period
    before it escapes, so its count exceeds p whatever the depth formula says. Measured
    at the Seahorse centre (a zoom from width 3 to 1e-22, 320x180, max 80000): at
    frames 6 and 7 (period 8007) counts from 1.01 p to 2.8 p, median 1.03 p and 1.26 p;
    auto gave 6400 and 7133, under p, and every pixel came out interior (black); at
    frame 5 (period 8007, around the minibrot) 99% of the counts below 4.4 p. A zoom
    that ends near the minibrot needs more: centred on that nucleus at width 2e-31
    (about ten minibrot sizes), 4 p left every pixel of a 1280x720 frame black."""
    from farm.numerics import period as per

    needs = [0] * len(plan.frames)
    if refs is None or plan.layout is not None:
        return needs
    w, h = plan.spec.size
    center = plan.spec.view.center
    # per nucleus: log2 of its copy scale, and of the view centre's distance from it
    known: dict[int, tuple[float, float]] = {}
    for i, k in enumerate(refs.frame_ref):
        if k < 0 or refs.refs[k].period == 0:
            continue
        ref = refs.refs[k]
        if k not in known:
            known[k] = (log2_copy_scale(ref), per.log2_distance(ref.point, center))
        scale, offset = known[k]
        half_diagonal = plan.frames[i].log10_spacing * math.log2(10) + math.log2(math.hypot(w, h) / 2)
        reach = scale + float(np.logaddexp2(half_diagonal, offset))
        needs[i] = math.ceil(auto_periods(ref.log2_scale, reach) * ref.period)
    return needs

