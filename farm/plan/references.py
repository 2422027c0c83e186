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

This module chooses; farm/plan/reference_orbits.py computes each reference's orbit.
Each distinct reference is stored once (store ``reference/*``, packed by
farm/plan/reference_pack.py), broadcast once to MPI workers, and read back on resume;
frames point at theirs by index (farm/plan/reference_types.py). The same scan tells
the centre's own fate (it escapes, or is attracted to a cycle), from which
farm/plan/structure.py warns of a zoom into nothing. A ``max = "auto"`` iteration limit
takes a few periods of a frame's nucleus reference (farm/plan/auto_limits.py);
farm/plan/reference_text.py describes the references for people.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from farm.plan.reference_orbits import (
    EXACT_BELOW_PIXEL,
    center_reference,
    misiurewicz_reference,
    nucleus_reference,
)
from farm.plan.reference_types import Fate, Reference, References

if TYPE_CHECKING:  # the rest where used: mpmath and gmpy2 take 40-60 ms to import
    from farm.numerics.scan import Scan

NUCLEUS_REACH = 4.0  # a nucleus serves a frame when it is within this many disc radii
REUSE_PERIODS = 4  # ... and its period at most this many times the frame's own
MISIUREWICZ = True  # a Misiurewicz point at or near the centre serves the frames it reaches
# (False: nuclei for every frame, as before; tests and comparisons)
SCAN_BIT_STEPS = 3e8  # the centre's scan costs at most about this many bit-steps (~1 s), ...
SCAN_MIN_STEPS = 100_000  # ... or this many steps
DEVICE_SCAN_STEPS = 2_000_000  # on a GPU (farm/numerics/handoff.py): 333k bits, 80-100 s on an H200


def scan_steps(max_iter: int, bits: int) -> tuple[int, int]:
    """(steps watching the centre's fate, steps looking for periods) of its scan: the
    frames' iteration limit, and beyond it for periods (a nucleus whose period exceeds
    the limit still serves), within the cost bound (at least SCAN_MIN_STEPS, and
    DEVICE_SCAN_STEPS where a long orbit at these bits goes to a GPU). Periods are
    looked for up to the limit at least, whatever the bound: a disc with no period
    takes the centre's orbit to the limit instead, which reuses the scan's (at the
    default escape radius), so looking on costs nothing more, and a nucleus at the
    centre whose period is past the bound (a deep one `farm find` wrote) is found."""
    from farm.numerics import handoff, orbiters

    cap = max(SCAN_MIN_STEPS, int(SCAN_BIT_STEPS / bits))
    if cap < DEVICE_SCAN_STEPS and bits >= orbiters.GPU_ORBIT_BITS and handoff.on_a_device(bits):
        cap = DEVICE_SCAN_STEPS
    return min(max_iter, cap), min(4 * max_iter + 1000, max(cap, max_iter))


def _log2_radius(plan, frame) -> float:
    """log2 of half the view's diagonal (the disc that holds the frame)."""
    w, h = plan.spec.size
    return math.log2(math.hypot(w, h) / 2) + frame.log10_spacing * math.log2(10)


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
    steps, period_steps = scan_steps(max_iter, bits)
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
    steps, _ = scan_steps(max_iter, bits)
    center = plan.spec.view.center
    return _fate(per.scan(center, bits, [], steps))

