"""The references described for people (the plan's report, ``farm plan``): what each
is, how far from the view centre, which frames (expmap: units) it serves; and
magnitudes of any depth written as "1.2e-345".
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from farm.plan.reference_types import References


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
                     f"{sci(dist)} from the centre ({sci(share)} of {what_of} {last.index}'s width)")
            what = f"nucleus of period {ref.period}, {where}"
        elif ref.kind == "misiurewicz":
            dist = per.log2_distance(ref.point, center)  # (the centre rounded to the point's bits: at it)
            where = "at the centre" if dist < 8 - ref.point.bits else f"{sci(dist)} from the centre"
            what = (f"Misiurewicz point of preperiod {ref.wrap}, period "
                    f"{len(ref.points) - 1 - ref.wrap}, {where}")
        else:
            what = f"the view centre, {len(ref.orbit) - 1} iterations"
        lines.append(f"{what}: {what_of}s {_span(frames)}")
    if len(lines) > most:
        lines = [*lines[:most - 2], f"... {len(lines) - most + 1} more", lines[-1]]
    return lines


def sci(log2_x: float) -> str:
    """2^log2_x as "1.2e-345" (any depth), or "0.25" near 1."""
    e10 = log2_x * math.log10(2)
    exp = math.floor(e10)
    if -3 <= exp <= 3:
        return f"{10 ** e10:.2g}"
    mantissa = round(10 ** (e10 - exp), 1)
    if mantissa >= 10:  # 9.96 rounds up to the next decade
        mantissa, exp = mantissa / 10, exp + 1
    return f"{mantissa:.1f}e{exp}"


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

