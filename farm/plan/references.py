"""Reference points of perturbed frames: which point each frame perturbs around.

A perturbed frame iterates every pixel as a small delta against one reference orbit
(kernels/perturb.cl). Skipping iterations pays where the reference is a nucleus of a
minibrot near the view: its orbit returns to 0 after its period p, so it is computed
for one period and reused (the kernel wraps at p), pixels near the minibrot follow it
period after period, and the skip tables can take whole periods. Selection, per zoom:

1. The view centre's orbit is scanned once (farm/numerics/scan.py) for the period
   of the lowest-period atom each frame's disc meets (the disc holds the view: radius
   half the diagonal), and for a return onto a repelling cycle.
2. Such a return (after m steps, onto a cycle of period q) means the centre is at or
   near a Misiurewicz point of preperiod m and period q. That point serves every
   frame it reaches (``NUCLEUS_REACH`` disc radii): its orbit is m + q steps long at
   any depth (Z(m + q) = Z(m)), the kernels go round its cycle (laps of it,
   farm/numerics/orbit.laps), and the skip tables take whole laps. The centre itself
   is the point when Newton's step from it is below 2^-64 of a pixel (a centre that
   `farm find` wrote): its scanned orbit is then the reference, and the scan the only
   pass at the depth's precision. Else Newton's method finds the point. Frames out of
   its reach go on to step 3.
3. Newton's method from the centre finds a nucleus of a frame's period. Frames go
   deepest first, and a frame takes the lowest-period nucleus already found that lies
   within ``NUCLEUS_REACH`` radii of its disc (further away, deltas grow large) with a
   period at most ``REUSE_PERIODS`` times its own; only when there is none does Newton
   run for its own period (see _choose_nuclei).
4. Frames without a usable nucleus (a centre outside the set, or inside a component
   whose disc meets no atom of lower period) use the centre itself, iterated to the
   frames' iteration limit or to its escape (the scan's orbit, when it went that far). So do the units of an
   exponential map (farm/plan/expmap.py: its polar tiles are offsets from the centre).

Each distinct reference is stored once (store ``reference/*``), broadcast once to MPI
workers, and read back on resume; frames point at theirs by index. The same scan
tells the centre's own fate (it escapes, or is attracted to a cycle), from which
farm/plan/structure.py warns of a zoom into nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # the rest where used: mpmath and gmpy2 take 40-60 ms to import, and
    # colouring a store's frames (farm encode, frames) needs only this module's classes
    from farm.numerics import period as per
    from farm.numerics.orbit import Orbit
    from farm.numerics.scan import Scan

NUCLEUS_REACH = 4.0  # a nucleus serves a frame when it is within this many disc radii
MISIUREWICZ = True  # a Misiurewicz point at or near the centre serves the frames it reaches
EXACT_BELOW_PIXEL = 64  # the centre is the point when Newton's step is 2^-64 of a pixel or less
# (False: nuclei for every frame, as before; tests and comparisons)
REUSE_PERIODS = 4  # ... and its period at most this many times the frame's own


@dataclass(frozen=True)
class Reference:
    """One reference orbit.

    point    the reference c (decimal strings exact at ``point.bits`` bits)
    period   p > 0: c is a nucleus of period p; the orbit holds Z(0) .. Z(p), Z(p) ~ 0,
             and pixels wrap to Z(0) at p. 0: not a nucleus
    points   Z(0) = 0 .. Z(L-1), rounded from ``point.bits`` bits as
             farm/numerics/orbit.py keeps them (a double mantissa and an exponent);
             ``orbit`` is the same as (L, 2) float64 doubles
    kind     "nucleus"; "misiurewicz": c is a Misiurewicz point of preperiod ``wrap``
             and period L - 1 - wrap, its orbit Z(0) .. Z(wrap + period) with Z(wrap
             + period) = Z(wrap) (to c's precision), and pixels wrap to Z(wrap) (the
             kernels get laps of the cycle: device_orbit); "center": the view centre,
             iterated to the frames' iteration limit or its escape
    log2_scale, angle  for a nucleus, lambda' = prod_{m=1}^{p-1} 2 Z(m) = 2^log2_scale
             e^(i angle): near the minibrot one period takes z to z_p + lambda' z^2, so
             w = lambda' z are the minibrot's own coordinates (the kernel's interior
             test, kernels/perturb.cl); 0 otherwise
    wrap     where pixels go on at the orbit's end: 0, or a Misiurewicz point's preperiod
    """

    point: per.Point
    period: int
    points: Orbit = field(compare=False, repr=False)
    kind: str = "center"
    log2_scale: float = 0.0
    angle: float = 0.0
    wrap: int = 0

    @property
    def orbit(self) -> np.ndarray:
        """(L, 2) float64: Z(0) .. Z(L-1) as doubles (below 1e-308 they underflow)."""
        return self.points.values


@dataclass(frozen=True)
class References:
    """The distinct references of a plan, and the index of each frame's (-1: the
    frame is not perturbed)."""

    refs: tuple[Reference, ...]
    frame_ref: tuple[int, ...]
    centre: Fate | None = field(default=None, compare=False)  # when just selected

    def of(self, frame: int) -> Reference:
        k = self.frame_ref[frame]
        if k < 0:
            raise ValueError(f"frame {frame} is not perturbed: it has no reference")
        return self.refs[k]


@dataclass(frozen=True)
class Fate:
    """What becomes of the view centre's own orbit (farm/plan/structure.py warns with it).

    kind     "exterior" (it escapes), "interior" (attracted to a cycle) or "unknown"
             (neither seen within the steps the scan could afford)
    n        the escape count (exterior) or the cycle's period (interior)
    log2_de  log2 of the distance estimate to the set's boundary (exterior: to the set;
             interior: to the component's boundary); the distance is between a quarter
             of it and it
    """

    kind: str
    n: int = 0
    log2_de: float = math.nan


SCAN_BIT_STEPS = 3e8  # the centre's scan costs at most about this many bit-steps (~1 s)


def _scan_steps(max_iter: int, bits: int) -> tuple[int, int]:
    """(steps watching the centre's fate, steps looking for periods) of its scan: the
    frames' iteration limit, and beyond it for periods (a nucleus whose period exceeds
    the limit still serves), both within the cost bound (at least 10^5 steps)."""
    cap = max(100_000, int(SCAN_BIT_STEPS / bits))
    return min(max_iter, cap), min(4 * max_iter + 1000, cap)


def _log2_radius(plan, frame) -> float:
    """log2 of half the view's diagonal (the disc that holds the frame)."""
    w, h = plan.spec.size
    return math.log2(math.hypot(w, h) / 2) + frame.log10_spacing * math.log2(10)


def lambda_prime(points: Orbit) -> tuple[float, float]:
    """(log2 |lambda'|, arg lambda' in [0, 2 pi)) of lambda' = prod_{m=1}^{L-2} 2 Z(m),
    for an orbit Z(0) .. Z(L-1) of a nucleus (summed as logs and angles: no overflow,
    and no underflow where Z(m) is below double's range)."""
    mant = points.mant[1:-1]
    logs = 1.0 + points.log2_abs[1:-1]
    angles = np.arctan2(mant[:, 1], mant[:, 0])
    return float(np.sum(logs)), float(np.sum(angles) % (2 * math.pi))


def select(plan, progress: Callable[[str], None] | None = None) -> References | None:
    """The references of ``plan``'s perturbed frames (None when no frame is perturbed).
    ``progress(text)`` hears about each step (for the command line)."""
    from farm.numerics import period as per

    frames = plan.perturbed
    if not frames:
        return None
    say = progress or (lambda text: None)
    center = plan.spec.view.center
    bits = max(f.bits for f in frames)
    max_iter = max(f.max_iter for f in frames)
    if getattr(plan, "layout", None) is not None:
        # an exponential map: its polar tiles measure offsets from the centre itself
        say(f"reference: the view centre, up to {max_iter} iterations")
        centre = center_reference(center, bits, max_iter, plan)
        return References((centre,), tuple(0 if f.precision == "perturb" else -1 for f in plan.frames))
    radii = [_log2_radius(plan, f) for f in frames]
    steps, period_steps = _scan_steps(max_iter, bits)
    exact = min(f.log10_spacing for f in frames) * math.log2(10) - EXACT_BELOW_PIXEL
    scan = per.scan(center, bits, radii, steps, period_steps, repeats=MISIUREWICZ, log2_exact=exact)
    chosen: list[tuple[Reference | None, list[int]]] = []
    reach = max(radii) + math.log2(NUCLEUS_REACH)
    if scan.repeat is not None and MISIUREWICZ and scan.log2_newton <= reach + 1:
        # a Misiurewicz point at (or near enough) the centre
        misi = misiurewicz_reference(plan, frames, scan, bits, say)
        dist = -math.inf if misi is None else per.log2_distance(misi.point, center)
        near = [k for k, r in enumerate(radii) if misi is not None and dist <= r + math.log2(NUCLEUS_REACH)]
        if near:
            chosen.append((misi, [frames[k].index for k in near]))
        rest = [k for k in range(len(frames)) if k not in set(near)]
        if rest:  # frames out of its reach: periods from a scan that goes on past the cycle
            scan = per.scan(center, bits, [radii[k] for k in rest], steps, period_steps)
            chosen += _choose_nuclei(plan, [frames[k] for k in rest], [radii[k] for k in rest],
                                     scan.periods, bits, scan)
    else:
        chosen = _choose_nuclei(plan, frames, radii, scan.periods, bits, scan)
    refs: list[Reference] = []
    frame_ref: list[int] = [-1] * len(plan.frames)
    for ref_or_none, members in chosen:
        if ref_or_none is not None:
            ref = ref_or_none
        else:
            iterations = max(plan.frames[i].max_iter for i in members)
            say(f"reference: the view centre, up to {iterations} iterations")
            ref = center_reference(center, bits, iterations, plan, scanned=scan)
        for i in members:
            frame_ref[i] = len(refs)
        refs.append(ref)
    return References(tuple(refs), tuple(frame_ref), _fate(scan))


def misiurewicz_reference(plan, frames, scan: Scan, bits: int,
                          say: Callable[[str], None]) -> Reference | None:
    """The Misiurewicz point whose cycle the centre's orbit landed on (scan.repeat), as a
    reference: the centre itself when Newton's step from it is below 2^-64 of the
    deepest pixel spacing (its scanned orbit is then the reference's: no more work),
    else the point Newton's method reaches from the centre, and its orbit (None when
    Newton fails, or lands on a point of preperiod below 2: a nucleus)."""
    from farm.numerics import period as per

    assert scan.repeat is not None and scan.orbit is not None
    k, q = scan.repeat
    center = plan.spec.view.center
    log2_spacing = min(f.log10_spacing for f in frames) * math.log2(10)
    if scan.log2_newton <= log2_spacing - EXACT_BELOW_PIXEL and len(scan.orbit) > k + q:
        c, points = per.parse(center, bits), scan.orbit.head(k + q + 1)
    else:
        say(f"reference: Newton's method to the Misiurewicz point of preperiod {k}, period {q}")
        found = per.misiurewicz(per.parse(center, bits), k, q, bits)
        if found is None:
            return None
        got = per.preperiodic_orbit(found, q, bits, k + q)  # its preperiod at full precision
        if got is None or got[1] < 2:
            return None
        c, (points, k) = found, got
    return Reference(per.point(c, bits), 0, points, "misiurewicz", wrap=k)


def _choose_nuclei(plan, frames, radii: list[float], periods: Sequence[int],
                   bits: int, scanned: Scan | None = None
                   ) -> list[tuple[Reference | None, list[int]]]:
    """(nucleus, or None for the centre; its frames) for the perturbed ``frames``.

    Frames go deepest first: a frame takes the lowest-period nucleus already found that
    lies within reach of it (``NUCLEUS_REACH`` disc radii) with a period at most
    ``REUSE_PERIODS`` times its own, else Newton's method finds its own period's
    nucleus. A zoom into a Misiurewicz point meets a new period at every frame; this
    way it needs a few nuclei, not one per frame (each costs several passes over its
    period at full precision)."""
    from farm.numerics import period as per

    center = plan.spec.view.center
    found: dict[int, tuple[Reference, float] | None] = {}  # period -> (nucleus, log2 dist)
    choice: dict[int, Reference | None] = {}
    for k in sorted(range(len(frames)), key=lambda k: radii[k]):  # deepest first
        p, reach = periods[k], radii[k] + math.log2(NUCLEUS_REACH)
        near = [ref for ref, dist in (v for v in found.values() if v is not None)
                if dist <= reach and (p == 0 or ref.period <= REUSE_PERIODS * p)]
        if not near and p and p not in found:
            ref = nucleus_reference(center, p, bits, plan, scanned)
            entry = found[p] = None if ref is None else (ref, per.log2_distance(ref.point, center))
            if entry is not None and entry[1] <= reach:
                near = [entry[0]]
        choice[frames[k].index] = min(near, key=lambda r: r.period) if near else None
    groups: dict[int, tuple[Reference | None, list[int]]] = {}
    for i in sorted(choice):
        ref = choice[i]
        key = -1 if ref is None else ref.period
        groups.setdefault(key, (ref, []))[1].append(i)
    return [groups[key] for key in sorted(groups, key=lambda q: (q < 0, q))]


def _fate(scan: Scan) -> Fate:
    """What the scan of the centre's orbit found: an escape, an attracting cycle (found
    by the scan's own Newton), a repelling one (the centre is a Misiurewicz point, on
    the boundary: "boundary", n its preperiod), or none of them."""
    if scan.repeat is not None:
        return Fate("boundary", scan.repeat[0])
    if scan.escaped:
        assert scan.log2_de is not None
        return Fate("exterior", scan.escaped, scan.log2_de)
    if scan.returns and scan.cycle is not None:  # the scan found the cycle (no second Newton)
        return Fate("interior", scan.returns, scan.cycle.log2_de)
    return Fate("unknown")


def fate_of(plan) -> Fate:
    """The centre's fate for a plan without perturbed frames (select() finds it
    otherwise): a scan at the deepest frame's precision."""
    from farm.numerics import period as per

    bits = max(f.bits for f in plan.frames)
    max_iter = max(f.max_iter for f in plan.frames)
    steps, _ = _scan_steps(max_iter, bits)
    center = plan.spec.view.center
    return _fate(per.scan(center, bits, [], steps))


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
    r2 = _r2(plan)
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


def describe(refs: References, plan, most: int = 8) -> list[str]:
    """One line per reference (the first ``most`` - 1 and the last, when there are
    more): what it is, how far from the centre, which frames (expmap: units) it serves."""
    from farm.numerics import period as per

    center = plan.spec.view.center
    w = plan.spec.size[0]
    what_of = "frame" if plan.layout is None else "unit"  # expmap: the references serve units
    lines = []
    for k, ref in enumerate(refs.refs):
        frames = [i for i, r in enumerate(refs.frame_ref) if r == k]
        if ref.kind == "nucleus":
            dist = per.log2_distance(ref.point, center)
            last = plan.frames[frames[-1]]
            share = dist - (last.log10_spacing + math.log10(w)) * math.log2(10)
            where = ("at the centre" if dist < 8 - ref.point.bits else
                     f"{_e(dist)} from the centre ({_e(share)} of {what_of} {last.index}'s width)")
            what = f"nucleus of period {ref.period}, {where}"
        elif ref.kind == "misiurewicz":
            dist = per.log2_distance(ref.point, center)  # (the centre rounded to the point's bits: at it)
            where = "at the centre" if dist < 8 - ref.point.bits else f"{_e(dist)} from the centre"
            what = (f"Misiurewicz point of preperiod {ref.wrap}, period "
                    f"{len(ref.points) - 1 - ref.wrap}, {where}")
        else:
            what = f"the view centre, {len(ref.orbit) - 1} iterations"
        lines.append(f"{what}: {what_of}s {_span(frames)}")
    if len(lines) > most:
        lines = [*lines[:most - 2], f"... {len(lines) - most + 1} more", lines[-1]]
    return lines


def _e(log2_x: float) -> str:
    """2^log2_x as "1.2e-345" (any depth), or "0.25" near 1."""
    e10 = log2_x * math.log10(2)
    exp = math.floor(e10)
    if -3 <= exp <= 3:
        return f"{10 ** e10:.2g}"
    mantissa = round(10 ** (e10 - exp), 1)
    if mantissa >= 10:  # 9.96 rounds up to the next decade
        mantissa, exp = mantissa / 10, exp + 1
    return f"{mantissa:.1f}e{exp}"


def nucleus_reference(center: Sequence[str], p: int, bits: int, plan,
                      scanned: Scan | None = None) -> Reference | None:
    """The nucleus of period ``p`` that Newton's method finds from the centre, as a
    reference (None when Newton fails or finds a nucleus of a lower period). When the
    centre is that nucleus to within 2^-64 of the deepest pixel (Newton's step from
    it, |z_p / dz_p|, from the centre's scan at the same precision: a centre that `farm
    find` wrote), the scanned orbit is the reference: no pass more at full precision."""
    from farm.numerics import period as per

    if scanned is not None and _is_nucleus(scanned, p, plan):
        c = per.parse(center, bits)
        assert scanned.orbit is not None
        points = scanned.orbit.head(p + 1)
        return Reference(per.point(c, bits), p, points, "nucleus", *lambda_prime(points))
    c = per.nucleus(per.parse(center, bits), p, bits)
    if c is None or per.lowest_return(c, p, bits) != p:
        return None
    points = per.orbit(c, bits, p, _r2(plan))
    if len(points) != p + 1:
        return None
    return Reference(per.point(c, bits), p, points, "nucleus", *lambda_prime(points))


def _is_nucleus(scanned: Scan, p: int, plan) -> bool:
    """Whether Newton's step from the scanned centre to a root of z_p, |z_p / dz_p| (the
    derivative in doubles along the scanned orbit), is below 2^-64 of the deepest
    perturbed frame's pixel."""
    from farm.numerics.orbit import Derivative

    got = scanned.orbit
    if got is None or len(got) <= p:
        return False
    dz = Derivative()
    for k in range(p):
        dz.step(float(got.mant[k, 0]), float(got.mant[k, 1]), int(got.exps[k]))
    log2_pixel = min(f.log10_spacing for f in plan.perturbed) * math.log2(10)
    return float(got.log2_abs[p]) - dz.log2_abs <= log2_pixel - EXACT_BELOW_PIXEL


def center_reference(center: Sequence[str], bits: int, iterations: int, plan,
                     progress: Callable[[int], None] | None = None,
                     scanned: Scan | None = None) -> Reference:
    """The centre's orbit to ``iterations`` (or its escape); the centre's scan at the
    same precision and escape radius 2, when it covers that far, is taken as it is."""
    from farm.numerics import period as per

    c = per.parse(center, bits)
    got = None if scanned is None else scanned.orbit
    if scanned is not None and got is not None and _r2(plan) == 4.0 and (
            len(got) > iterations or scanned.escaped):
        return Reference(per.point(c, bits), 0, got.head(iterations + 1), "center")
    points = per.orbit(c, bits, iterations, _r2(plan), progress)
    return Reference(per.point(c, bits), 0, points, "center")


def _r2(plan) -> float:
    r = plan.spec.iterations.escape_radius
    return float(r) * float(r)


def _span(indices: Sequence[int]) -> str:
    """"3-17, 20" from sorted frame indices."""
    out, run = [], [indices[0]]
    for k in list(indices[1:]) + [None]:
        if k is not None and k == run[-1] + 1:
            run.append(k)
            continue
        out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
        if k is not None:
            run = [k]
    return ", ".join(out)


from farm.plan.reference_pack import pack, unpack  # noqa: E402  (the store's and MPI's form)

__all__ = ["Fate", "Reference", "References", "pack", "select", "unpack"]
