"""A zoom into nothing: the frames past which the view holds no part of the set's edge.

A zoom shows structure while the boundary of the Mandelbrot set crosses the view. Its
centre's orbit tells how far the centre is from that boundary
(farm/plan/references.py scans it once, farm/numerics/scan.py):

* the orbit escapes: the centre is outside the set, and the exterior distance estimate
  b = 2 |z| ln|z| / |dz/dc| bounds its distance d to the set, b/4 <= d <= b;
* the orbit is attracted to a cycle of period q: the centre is inside a component, and
  the interior distance estimate b (from the cycle's derivatives) bounds its distance
  to the component's edge the same way.

Every frame whose view (half its diagonal from the centre) fits inside b/4 of the
centre shows no boundary at all: one flat gradient outside the set, one flat colour
inside. A centre given with fewer decimals than the zoom's depth is the usual cause (it
is a different point, almost always outside the set). ``check`` returns one warning
line for such a zoom, naming the width, the first frame and what to do; none when the
centre stays within reach of the boundary (or the scan could not tell).
"""

from __future__ import annotations

import math
from decimal import Decimal

from farm.plan.reference_text import sci
from farm.plan.reference_types import Fate, References
from farm.plan.references import fate_of


def _decimals(text: str) -> int:
    """Digits after the decimal point of a decimal string ("1.5e-3": 4)."""
    exponent = Decimal(text).as_tuple().exponent
    return max(0, -exponent) if isinstance(exponent, int) else 0


def empty_from(plan, fate: Fate) -> tuple[int, float] | None:
    """(first frame, log2 width) past which frames show no boundary, or None."""
    if fate.kind not in ("exterior", "interior") or not math.isfinite(fate.log2_de):
        return None
    w, h = plan.spec.size
    # half the diagonal of a frame of width x is x hypot(w, h) / (2 w); it fits within b/4
    log2_width = fate.log2_de - 2 - math.log2(math.hypot(w, h) / (2 * w))
    for f in plan.frames:
        if (f.log10_spacing + math.log10(w)) * math.log2(10) < log2_width:
            return f.index, log2_width
    return None


def check(plan, refs: References | None) -> list[str]:
    """Warning lines (without the "farm: warning: " prefix) for ``plan``: empty when
    the zoom keeps the boundary in view."""
    fate = refs.centre if refs is not None and refs.centre is not None else fate_of(plan)
    found = empty_from(plan, fate)
    if found is None:
        return []
    first, log2_width = found
    last = len(plan.frames) - 1
    frames = f"frame {first}" if first == last else f"frames {first}-{last}"
    width = sci(log2_width)
    center = plan.spec.view.center
    decimals = min(_decimals(center[0]), _decimals(center[1]))
    deepest = min(plan.spec.view.width, key=Decimal)
    given = ""
    if decimals < -Decimal(deepest).adjusted():  # fewer decimals than the zoom's depth
        given = f" (it has {decimals} decimals, the zoom goes to width {deepest})"
    if fate.kind == "exterior":
        where = (f"the centre is outside the set, about {sci(fate.log2_de - 1)} from it (its "
                 f"orbit escapes after {fate.n} iterations){given}")
        what = "shows no structure" if first == last else "show no structure"
        todo = "give more digits of a point on the boundary"
    else:
        where = (f"the centre is inside the set, about {sci(fate.log2_de - 1)} from the edge of "
                 f"its component (period {fate.n}){given}")
        what = "shows one flat colour" if first == last else "show one flat colour"
        todo = "give a point on the boundary"
    return [f"view.center: {frames} (width below {width}) {what}: {where}; {todo}, or end "
            f"the zoom at width {width}"]
