"""``farm find``: deep targets found for the user, and a job file that zooms there.

From a point near the boundary and a target depth (the last frame's width), three
kinds of target, each given to as many digits as the depth needs:

* a **minibrot** (the default): the period p of the lowest-period atom that the disc
  around the point meets (farm/numerics/scan.py, the same period detection the
  references use), Newton's method to its nucleus (period.nucleus), and its width,
  2.25 / |lambda' beta| (the copy of the whole set it is: farm/plan/references.py,
  log2_copy_scale);
* a **chain** (``--chain``) of embedded Julia sets down to the depth, in the manner of
  Kalles Fraktaler's Newton zoom: from a minibrot of width s found in a view of width
  w, the next view is 2/3 of the way there (width w^(1/3) s^(2/3)), where the
  minibrot's embedded Julia set fills the view; the next point sits on that Julia set
  (a quarter of the view from the nucleus, in a fixed direction), whose disc meets an
  atom of a higher period, and so on until a minibrot is as small as the target. Each
  step doubles the shapes around the centre: a start anywhere near the boundary
  makes a zoom with new structure all the way down;
* a minibrot **on a spiral** (by default below 1e-10000, or below ``--structure``):
  the Misiurewicz points lead down only to the structure's width, and the set is
  self-similar about the last one, each turn of its spiral holding a copy of every
  minibrot of the turn before, |lambda|^2 narrower (farm/numerics/spiral.py); the
  family of a minibrot found near the point is followed inward to the depth, one
  Newton iteration a level (about three orbits of the last period in all), where a
  descent's dozen iterations at each of its levels would take hours at 1e-100000;
* a **Misiurewicz point** (``--misiurewicz``, after the above or from the point): a
  point c with z_{k+q}(c) = z_k(c) within the view, found by Newton's method on
  z_{k+q} - z_k (period.misiurewicz) for small periods q and the preperiod k at which
  such points lie a few of them per view; its reference is k + q steps long at any
  depth (farm/plan/references.py), so zooms into it are cheap however deep.

Precision: each search works at the bits that resolve the scale it works at (the
view's, then the minibrot's), plus MARGIN_BITS, so a descent or a chain raises its
precision only as it goes deeper. A solve from a guess a fraction of the view away
first runs Newton's method in perturbation against the centre's rounded orbit
(farm/numerics/far_newton.py: doubles with an exponent, no full-precision orbit) until
it is within about 2^-44 of the view; then (farm/numerics/newton.py) the precision
rises as Newton converges: told the scale where the roots lie and where its guess is
known, the early iterations run at the bits that resolve the error they leave and only
the last two at the full bits. Period and preperiod checks (lowest_return,
preperiodic_orbit) run at the full bits.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from farm.errors import UsageError
from farm.numerics import far_newton
from farm.numerics import period as per
from farm.numerics.handoff import HandoffOrbiter
from farm.numerics.orbit import Derivative, Orbit, Recorder
from farm.numerics.scan import scan
from farm.numerics.spiral import SpiralError, follow
from farm.plan.auto_limits import log2_copy_scale
from farm.plan.reference_orbits import lambda_prime
from farm.plan.reference_types import Reference

LOG2_10 = math.log2(10)
MARGIN_BITS = 96  # beyond the scale a search works at
GUESS_SLACK = 8  # a root Newton found at b bits is known to about b - 8 (its tolerance)
MAX_PERIOD = 2_000_000  # the longest period a search scans for
CHAIN_STEP = 2 / 3  # a chain's next view: this far (in log scale) towards the minibrot
CHAIN_OFFSET = 0.25  # its next point: this many view widths from the nucleus ...
CHAIN_ANGLE = math.pi / 5  # ... in this direction (any fixed one off the real axis)
MINIBROT_MARGIN = 4  # a deep minibrot is looked for about 2^-4 of the depth wide ...
MINIBROT_TRIES = 4  # ... and narrower views where the first is still wider than half the depth
FAR_KNOWN = 30  # a start from afar (far_newton.py) is known to about 2^-30 of the view
DESCENT_TRIES = 4  # a descent that finds nothing at the next scale tries nearer ones
ANGLES = (math.pi / 5, 3 * math.pi / 5, math.pi, 7 * math.pi / 5)  # Newton's starts off a point
CHAIN_DISC = 1 / 16  # and the disc its period detection looks at: this many widths
NUCLEUS_VIEWS = 2  # a minibrot found from a view may lie this many (log2) view widths off
SEARCH_DISCS = 12  # a minibrot search tries discs of the view's diameter, 1/4 of it, ...
SPIRAL_BELOW = -10000 * LOG2_10  # minibrots deeper than this follow a spiral by default, ...
STRUCTURE_SHARE = 100  # ... from a descent to this fraction of the depth's digits
SPIRAL_START = 20  # a spiral's first minibrot is looked for this many (log2) below its point's view
MINIBROT_GAP = 3.5  # a deep minibrot is looked for about 2^-3.5 of the depth wide (1 to 6 is fine)


@dataclass(frozen=True)
class Stage:
    """One minibrot a search found: its nucleus, period, and log2 of its width."""

    center: tuple[str, str]
    period: int
    log2_width: float
    log2_view: float  # the width of the view it was found in


@dataclass(frozen=True)
class Target:
    """Where a zoom goes: ``center`` (decimal strings), what is there, and the stages."""

    kind: str  # "minibrot" | "misiurewicz"
    center: tuple[str, str]
    period: int  # the minibrot's period, or the Misiurewicz point's cycle
    preperiod: int = 0  # a Misiurewicz point's
    log2_width: float = math.nan  # a minibrot's width (log2)
    stages: tuple[Stage, ...] = field(default=())


def bits_for(log2_scale: float) -> int:
    """Bits that resolve 2^log2_scale near the set (|c| < 4), with MARGIN_BITS to spare."""
    return max(128, int(math.ceil(2 - log2_scale)) + MARGIN_BITS)


def minibrot(center: tuple[str, str], log2_view: float, say: Callable[[str], None]) -> Stage:
    """A minibrot near ``center``: for discs of diameter 2^log2_view around it and
    smaller ones (a quarter each time), the period of the lowest-period atom each meets
    (lowest first), Newton's method to that atom's nucleus, and the first nucleus
    whose minibrot is narrower than the view and within it. (A satellite bulb is a
    nucleus too, but its width is not that of a copy of the set: the estimate comes
    out wider than the view, and the search goes on.)"""
    bits = bits_for(log2_view)
    radii = [log2_view - 1 - 2 * j for j in range(SEARCH_DISCS)]
    scanned = scan(center, bits, radii, 0, MAX_PERIOD)
    tried: set[int] = set()
    for p in sorted(set(scanned.periods) - {0}):
        found = _nucleus(center, p, bits, log2_view, tried, scanned.orbit)
        if found is None:
            continue
        c, q = found
        width = _width(c, q, bits)
        if width < log2_view - 1:
            say(f"find: a minibrot of period {q} in the view of width {scientific(log2_view)}, "
                f"width {scientific(width)}")
            if bits < bits_for(width):  # refine at the minibrot's own scale (Newton is close)
                known, bits = bits, bits_for(width)
                c = per.nucleus(c, q, bits, scale=log2_view, guess_bits=known - GUESS_SLACK)
                if c is None:
                    raise UsageError(f"the nucleus of period {q} did not converge at {bits} bits")
                width = _width(c, q, bits)
            point = per.point(c, bits)
            return Stage((point.re, point.im), q, width, log2_view)
    raise UsageError(f"no minibrot near {shortened(center)} within width {scientific(log2_view)}: the "
                     "point is too far from the set (or inside it); start nearer the boundary")


def _nucleus(center: tuple[str, str], p: int, bits: int, log2_view: float,
             tried: set[int], reference: Orbit | None) -> tuple[object, int] | None:
    """(nucleus, its period) that Newton's method reaches from the centre for period p
    (dividing lower periods out, else plain: then perhaps of a period dividing p),
    within 2^NUCLEUS_VIEWS view widths (period detection to first order does not put
    the nucleus inside the disc) and of a period not ``tried`` yet; None otherwise.
    ``reference``: the centre's rounded orbit, for the iterations from afar."""
    guess = per.parse(center, bits)
    for divide in (True, False):
        lower = {k for k in range(1, p) if p % k == 0} if divide else set()
        start = None if reference is None else _far(far_newton.nucleus, guess, reference, p, lower,
                                                     bits, log2_view)
        c = per.nucleus(start or guess, p, bits, divide=divide, scale=log2_view,
                        guess_bits=_far_known(start, log2_view))
        if c is None or per.log2_abs(c - guess) > log2_view + NUCLEUS_VIEWS:
            continue
        q = per.lowest_return(c, p, bits)
        if q in tried:
            return None
        tried.add(q)
        return c, q
    return None


def _width(c, p: int, bits: int, points: Orbit | None = None) -> float:
    """log2 of the width of the minibrot of nucleus c, period p: 2.25 / |lambda' beta|
    (``points``: its rounded orbit, where the caller has it)."""
    if points is None:
        points = per.orbit(c, bits, p, 1e300)
    ref = Reference(per.point(c, 64), p, points, "nucleus", *lambda_prime(points))
    return math.log2(2.25) - log2_copy_scale(ref)


def chain(start: tuple[str, str], log2_view: float, log2_depth: float,
          say: Callable[[str], None]) -> list[Stage]:
    """Minibrots down to the depth, each found on the embedded Julia set of the one
    before (see the module docstring); the last is as small as the depth or smaller."""
    stages = [minibrot(start, log2_view, say)]
    while stages[-1].log2_width > log2_depth:
        last = stages[-1]
        view = last.log2_view + CHAIN_STEP * (last.log2_width - last.log2_view)
        offset = CHAIN_OFFSET * 2.0 ** (view - math.floor(view))
        say(f"find: chain step {len(stages)}: the Julia set around period {last.period}, "
            f"width {scientific(view)}")
        for angle in ANGLES:  # a direction whose disc meets a higher period
            nxt = per.moved(last.center, offset * math.cos(angle), offset * math.sin(angle),
                            math.floor(view), bits_for(view))
            try:
                stage = minibrot(nxt, view + math.log2(CHAIN_DISC), say)
            except UsageError:
                continue
            if stage.period > last.period:
                break
        else:
            raise UsageError(f"the chain stopped at period {last.period}, width "
                             f"{scientific(last.log2_width)}: no higher period around it")
        stages.append(Stage(stage.center, stage.period, stage.log2_width, view))
    return stages


def misiurewicz(center: tuple[str, str], log2_view: float, say: Callable[[str], None],
                periods: int = 4, other: tuple[int, int] | None = None,
                log2_found: float | None = None) -> tuple[tuple[str, str], int, int]:
    """A Misiurewicz point within the view of width 2^log2_view around ``center``: (its
    decimal strings, preperiod, period); the first that Newton's method finds from the
    centre, for cycle periods 1 .. ``periods`` and the preperiods at which such points
    lie about 8 to 64 per view width (1 / |dz_k| apart). ``other``: the centre is
    itself a Misiurewicz point of that (preperiod, period), a root for many of these:
    it is refined to the view's precision, Newton starts 2^-8 of the view from it with
    it divided out (period.misiurewicz, other_than), and points nearer than 2^-10 of
    the view are passed over; ``log2_found``: the view it was found in (its digits
    resolve that: Newton refines it from there, newton.py)."""
    bits = bits_for(log2_view)
    c0 = per.parse(center, bits)
    nearest = -math.inf
    if other:
        known = log2_view if log2_found is None else log2_found
        c0 = per.misiurewicz(c0, *other, bits, scale=known,
                             guess_bits=bits_for(known) - GUESS_SLACK) or c0
        center = (point := per.point(c0, bits)).re, point.im
        nearest = log2_view - 10
    ks, reference = _preperiods(center, log2_view, periods)
    c_ref = per.parse(center, bits)  # the point of that orbit
    for angle in ANGLES if other else ANGLES[:1]:
        guess = c0 if not other else per.parse(per.moved(
            center, math.cos(angle), math.sin(angle), math.floor(log2_view) - 8, bits), bits)
        for q in range(1, periods + 1):
            for k in ks:
                start = _far(far_newton.misiurewicz, c_ref, reference, guess, k, q, bits, log2_view,
                             bool(other))
                c = per.misiurewicz(start or guess, k, q, bits, other_than=c0 if other else None,
                                    scale=log2_view, guess_bits=_far_known(start, log2_view))
                if c is None or not nearest < per.log2_abs(c - c0) <= log2_view:
                    continue
                found = _cycle(c, q, k, bits)
                if found is not None:
                    say(f"find: a Misiurewicz point of preperiod {found[0]}, period {found[1]}, in "
                        f"the view of width {scientific(log2_view)}")
                    point = per.point(c, bits)
                    return (point.re, point.im), *found
    raise UsageError(f"no Misiurewicz point found near {shortened(center)} within width "
                     f"{scientific(log2_view)}")


def _cycle(c, q: int, k: int, bits: int) -> tuple[int, int] | None:
    """(preperiod, least period) of the point c that Newton's method found for
    preperiod k and period q (its cycle's period may divide q, its preperiod be lower:
    both at full precision, period.preperiodic_orbit), or None; preperiods below 2 are
    nuclei, not Misiurewicz points."""
    for d in range(1, q + 1):
        if q % d == 0:
            got = per.preperiodic_orbit(c, d, bits, k + q)
            if got is not None:
                return (got[1], d) if got[1] >= 2 else None
    return None


def descend(start: tuple[str, str], log2_view: float, log2_depth: float,
            say: Callable[[str], None]) -> tuple[tuple[str, str], int, int]:
    """Misiurewicz points from the view down to the depth, each within the view of the
    one before, the digits of the scale doubling from one to the next: Newton's
    method from the last point, for a period it does not divide, finds a point on its
    spiral at the next scale. A Misiurewicz point's cycle repels, so the last orbit
    grows at the cycles' pace all the way (it does not dwell near 0, as orbits near
    minibrots do): its preperiod, and the periods of minibrots near it, stay about
    the iterations the depth needs."""
    center, k, q = misiurewicz(start, log2_view, say)
    view = log2_view
    while view > log2_depth:
        step = view - 4  # the scale's digits double ...
        for _ in range(DESCENT_TRIES):
            nxt = max(view + step, log2_depth)
            try:
                center, k, q = misiurewicz(center, nxt, say, other=(k, q), log2_found=view)
                break
            except UsageError:
                step /= 2  # ... or less where Newton finds nothing there
        else:
            raise UsageError(f"the descent stopped at width {scientific(view)}: no Misiurewicz point "
                             "found further down; try another start")
        view = nxt
    return center, k, q


def spiral(center: tuple[str, str], k: int, q: int, log2_found: float, log2_depth: float,
           say: Callable[[str], None]) -> Stage:
    """A minibrot about 2^-MINIBROT_GAP of the depth wide on the spiral of the
    Misiurewicz point ``center`` (preperiod k, period q, found in the view of width
    2^log2_found): the point refined to the depth's bits, a minibrot SPIRAL_START below
    its view (its family's first member), and that family followed inward
    (farm/numerics/spiral.py); each direction of ANGLES in turn."""
    bits = bits_for(log2_depth)
    point = _refined(center, k, q, log2_found, bits)
    lam = per.cycle_multiplier(point, k, q, bits_for(log2_depth - MINIBROT_GAP))
    exact = per.point(point, bits)
    view = log2_found - SPIRAL_START
    offset = CHAIN_OFFSET * 2.0 ** (view - math.floor(view))
    for angle in ANGLES:
        moved = per.moved((exact.re, exact.im), offset * math.cos(angle), offset * math.sin(angle),
                          math.floor(view), bits_for(view))
        try:
            first = minibrot(moved, view, say)
            c, p, _ = follow(point, q, lam, per.parse(first.center, bits), first.period,
                             first.log2_width, log2_depth - MINIBROT_GAP, log2_found, bits_for,
                             lambda period, width: say(f"find: the spiral's minibrot of period "
                                                       f"{period}, about {scientific(width)} wide"))
        except (UsageError, SpiralError):
            continue
        points = per.orbit(c, bits, p, 1e300)  # one long orbit for both checks
        if per.first_return(points, p, bits) != p:
            continue
        width = _width(c, p, bits, points)
        if not log2_depth - 6 <= width <= log2_depth - 1:  # wanted: 2^1 to 2^6 narrower
            continue
        say(f"find: a minibrot of period {p} on the spiral of the Misiurewicz point, width "
            f"{scientific(width)}")
        found = per.point(c, bits)
        return Stage((found.re, found.im), p, width, view)
    raise UsageError(f"no minibrot followed down the spiral of the Misiurewicz point at "
                     f"{shortened(center)}; try another start or --structure")


def _point_at(start: tuple[str, str], log2_view: float, log2_down: float,
              say: Callable[[str], None]) -> tuple[tuple[str, str], int, int, float]:
    """The Misiurewicz point the descent from ``start`` reaches at width 2^log2_down,
    or the view's own where that is within 2^8 of the view: (its centre, preperiod,
    period, log2 of the width of the view it was found in)."""
    if log2_down < log2_view - 8:
        return (*descend(start, log2_view, log2_down, say), log2_down)
    return (*misiurewicz(start, log2_view, say), log2_view)


def _refined(center: tuple[str, str], k: int, q: int, log2_found: float, bits: int):
    """The Misiurewicz point ``center`` (preperiod k, period q, its digits those of the
    view 2^log2_found wide it was found in) to ``bits`` bits: Newton's method from it."""
    c = per.misiurewicz(per.parse(center, bits), k, q, bits, scale=log2_found,
                        guess_bits=bits_for(log2_found) - GUESS_SLACK)
    if c is None:
        raise UsageError(f"the Misiurewicz point did not converge at {bits} bits")
    return c


def _preperiods(center: tuple[str, str], log2_view: float, extra: int) -> tuple[list[int], Orbit]:
    """Preperiods k at which |dz_k| (from the centre's orbit) puts 8 to 64 Misiurewicz
    points of preperiod k across the view: 2^(3 - log2_view) <= |dz_k| <= 2^(6 - ...);
    and the centre's rounded orbit to ``extra`` steps past the last (shorter where it
    escapes), the reference of Newton's solves from afar (far_newton.py)."""
    bits = bits_for(log2_view)
    run = HandoffOrbiter(per.parse(center, bits), bits)  # to a GPU once long and deep
    dz, rec, out = Derivative(), Recorder(), []
    z, last = (0.0, 0.0, 0), None  # last: the step the orbit goes to, once the preperiods are in
    try:
        for k in range(1, MAX_PERIOD):
            dz.step(*z)
            run.step()
            z = run.point()
            if not z[2] and z[0] * z[0] + z[1] * z[1] > 4:
                break
            rec.add(*z)
            if last is not None:
                if k >= last:
                    break
            elif dz.log2_abs >= 3 - log2_view:
                out.append(k)
                if dz.log2_abs >= 6 - log2_view or len(out) >= 6:
                    last = k + extra
    finally:
        run.close()
    return out or [max(2, k - 1)], rec.orbit()


def _far(solve, *args):
    """far_newton's ``solve(*args)``: a start near the root, or None (it gave up, or its
    reference orbit is too short: the centre escapes)."""
    try:
        return solve(*args)
    except ValueError:
        return None


def _far_known(start, log2_view: float) -> int | None:
    """newton.py's guess_bits for a start from afar (None: no start)."""
    return None if start is None else int(FAR_KNOWN - log2_view)


def find(start: tuple[str, str], log2_view: float, log2_depth: float, chained: bool = False,
         misi: bool = False, say: Callable[[str], None] = lambda text: None,
         log2_structure: float | None = None) -> Target:
    """The target of ``farm find`` (see the module docstring): a minibrot at about the
    depth (Misiurewicz points down to it first when it is deeper than the view), its
    Julia-set chain (``chained``), or a Misiurewicz point at the depth (``misi``).
    Misiurewicz points are followed down to 2^log2_structure; below, a zoom is
    self-similar: into the point itself (its reference shorter), or along its spiral
    to a minibrot (spiral(): minutes where a descent would take hours). The default:
    the depth, except for minibrots deeper than SPIRAL_BELOW (a STRUCTURE_SHARE-th
    of the depth's digits). The target has the depth's digits."""
    if chained:
        stages = chain(start, log2_view, log2_depth, say)
        last = stages[-1]
        return Target("minibrot", last.center, last.period, 0, last.log2_width, tuple(stages))
    deep = log2_depth < log2_view - 8
    if misi:
        down = log2_depth if log2_structure is None else max(log2_structure, log2_depth)
        center, k, q, known = _point_at(start, log2_view, down, say)
        if down > log2_depth:  # to the depth's digits: Newton from the point found
            bits = bits_for(log2_depth)
            c = _refined(center, k, q, known, bits)
            got = per.preperiodic_orbit(c, q, bits, k + q)
            if got is None or got[1] != k:
                raise UsageError(f"the Misiurewicz point did not converge at {bits} bits")
            exact = per.point(c, bits)
            center = exact.re, exact.im
        return Target("misiurewicz", center, q, k)
    if not deep:
        stage = minibrot(start, log2_view, say)
        return Target("minibrot", stage.center, stage.period, 0, stage.log2_width, (stage,))
    # minibrots near a Misiurewicz point at scale s are about s^2 wide (the copy of the
    # set they are sits at the point's scale twice over): one a few times narrower than
    # the depth lies near a point at half its digits (a little more, if the first is
    # too wide), or on the spiral of a point where new structure stops, further up
    half = (log2_depth - MINIBROT_MARGIN) / 2
    top = log2_structure
    if top is None:
        top = log2_depth / STRUCTURE_SHARE if log2_depth < SPIRAL_BELOW else log2_depth
    if top > half + MINIBROT_TRIES + SPIRAL_START:  # room for a spiral below the structure
        center, k, q, found = _point_at(start, log2_view, min(top, log2_view), say)
        stage = spiral(center, k, q, found, log2_depth, say)
        return Target("minibrot", stage.center, stage.period, 0, stage.log2_width, (stage,))
    near, _, _ = descend(start, log2_view, half + MINIBROT_TRIES, say)
    best = None
    for _ in range(2 * MINIBROT_TRIES):
        offset = CHAIN_OFFSET * 2.0 ** (half - math.floor(half))
        moved = per.moved(near, offset * math.cos(CHAIN_ANGLE), offset * math.sin(CHAIN_ANGLE),
                          math.floor(half), bits_for(log2_depth))
        stage = minibrot(moved, half, say)
        gap = log2_depth - stage.log2_width  # wanted: 2^1 to 2^6 narrower than the depth
        if best is None or abs(gap - 3.5) < abs(best[0] - 3.5):
            best = (gap, stage)
        if 1 <= gap <= 6:
            break
        half += 0.5 if gap > 6 else -0.5
    assert best is not None
    stage = best[1]
    return Target("minibrot", stage.center, stage.period, 0, stage.log2_width, (stage,))


def scientific(log2_x: float) -> str:
    """2^log2_x as 1.0e-123 (any exponent)."""
    e10 = log2_x / LOG2_10
    exp = math.floor(e10)
    mantissa = round(10 ** (e10 - exp), 1)
    if mantissa >= 10:
        mantissa, exp = mantissa / 10, exp + 1
    return f"{mantissa:.1f}e{exp}"


def shortened(center: tuple[str, str]) -> str:
    """A centre's first 24 characters of each part, for a message."""
    return f"({center[0][:24]}, {center[1][:24]})"
