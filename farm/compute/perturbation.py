"""Host-side arguments of a perturbed frame (kernels/perturb.cl), as numpy data.

For frame f with reference point C (farm/plan/references.py) and half pixel spacing
h = h_m 2^h_e, pixel (col, row) of the tile at (x0, y0) has the offset from C

    dc = ((kx0 + 2 col + ref_off.x) + i (ref_off.y - (ky0 + 2 row))) h

with kx0 = 2 x0 + 1 - W, ky0 = 2 y0 + 1 - H and ref_off = (centre - C) / h (two
doubles, rounded once from the exact difference). The skip table (farm/numerics/bla.py)
is built on the frame's reference orbit for |dc| up to the frame's largest offset.
With samples (farm/plan/samples.py) sample k moves the pixel's offset by soff[k] 2h
(the kernel adds it); samples stay inside the image, so the same bound holds.

A turned frame (angle theta, farm/plan/curve.py) turns each pixel's (and sample's)
offset from the view centre, in half spacings, before ref_off is added:

    dc = ((p cos - q sin + ref_off.x) + i (p sin + q cos + ref_off.y)) h

with p = kx0 + 2 col (+ 2 ox), q = -(ky0 + 2 row (+ 2 oy)) (exact doubles) and (cos,
sin) = ``rot``, the frame's cos theta and sin theta rounded to doubles (exact at
multiples of 90 degrees): the turned offset is rounded in double (about 2^-52 of a
pixel's offset, where the unturned one is exact), ref_off is the exact difference
rounded once, as for unturned frames. The turn keeps every |dc| (the bound below).
"""

from __future__ import annotations

import cmath
import functools
import math
import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

import farm.numerics as num
from farm.numerics import period as per
from farm.numerics.bla import EPS, OrbitMaps, SkipTable, empty_table, orbit_maps, skip_table_log2
from farm.numerics.orbit import Orbit, laps
from farm.plan import FramePlan, Plan, precision
from farm.plan.reference_types import Reference, References


@dataclass(frozen=True)
class DeviceOrbit:
    """A reference's orbit as the kernels read it (kernels/perturb.cl): its points (a
    Misiurewicz point's with laps of its cycle: farm/numerics/orbit.laps), where pixels
    go on after the last point, and what their delta gains there, Z(L-1) - Z(wrap) =
    (delta[0] + i delta[1]) 2^delta[2] (a Misiurewicz point's is 0 to its precision)."""

    points: Orbit
    wrap: int
    delta: tuple[float, float, int]


@functools.lru_cache(maxsize=8)
def device_orbit(ref: Reference, iterations: int) -> DeviceOrbit:
    """``ref``'s orbit for frames of up to ``iterations`` iterations (see DeviceOrbit)."""
    if ref.kind == "misiurewicz":
        return DeviceOrbit(laps(ref.points, ref.wrap, iterations), ref.wrap, (0.0, 0.0, 0))
    last = ref.points.mant[-1]
    return DeviceOrbit(ref.points, 0, (float(last[0]), float(last[1]), int(ref.points.exps[-1])))


LAP_MARGIN = 2.0  # a Misiurewicz orbit's laps cover twice the steps its pixels need


def frame_orbit(plan: Plan, refs: References, k: int) -> DeviceOrbit:
    """Reference k's device orbit, for the largest iteration limit of its frames; a
    Misiurewicz point's laps only as far as its deepest frame's pixels go: a pixel
    leaves the point's neighbourhood once its delta, about its offset |dc| times
    |dz/dc| at the preperiod, has grown to 1 at the cycle's pace, and one that goes on
    wraps back to the cycle (laps cost skip-table rows, 28 doubles a point)."""
    mine = [plan.frames[i] for i, r in enumerate(refs.frame_ref) if r == k]
    iterations = max(f.max_iter for f in mine)
    ref = refs.refs[k]
    if ref.kind == "misiurewicz":
        log2_pace = float(np.mean(1.0 + ref.points.log2_abs[ref.wrap:-1]))  # per step
        depth = -min(f.log10_spacing for f in mine) * math.log2(10)
        need = ref.wrap + LAP_MARGIN * depth / max(log2_pace, 0.05) + 1024
        iterations = min(iterations, int(need))
    return device_orbit(ref, iterations)


@dataclass(frozen=True)
class PerturbedFrame:
    """Everything a launch of ``frame`` needs besides its tile position."""

    ref: int  # index into References.refs
    ref_off: tuple[float, float]  # (centre - C) / h
    h_m: float  # h = h_m 2^h_e, h_m in [0.5, 1)
    h_e: int
    log2_dc_max: float  # log2 of a bound on every pixel's |dc|
    table: SkipTable  # empty (levels 0..1, no maps): no skipping
    lam: tuple[complex, int]  # lambda' = lam[0] 2^lam[1] for the interior test; (0, 0): off
    rot: tuple[float, float] = (1.0, 0.0)  # (cos, sin) of the frame's angle, doubles
    # the table as the kernels read it (farm/numerics/bla.py device_layout: coef, radius),
    # made with the rest of the frame's preparation (farm/compute/prep.py), off the
    # launch path, whose table then has no coefficients; coef's columns past its last
    # are zero (quadratic maps: 10 of bla.COLUMNS); None: the renderer makes it
    layout: tuple[np.ndarray, np.ndarray] | None = None


class MapsCache:
    """Each reference's skip maps (farm/numerics/bla.py: orbit_maps), built once and
    shared by the frames that use it: only the maps' radii depend on the frame. The
    ``KEEP`` most recently used references are kept. Thread-safe."""

    KEEP = 4

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._maps: OrderedDict[tuple[int, bool], OrbitMaps] = OrderedDict()

    def get(self, index: int, orbit, high: bool) -> OrbitMaps:
        with self._lock:  # (a second thread waits rather than building them again)
            key = (index, high)
            maps = self._maps.get(key)
            if maps is None or maps.orbit is not orbit:
                maps = self._maps[key] = orbit_maps(orbit, high)
                while len(self._maps) > self.KEEP:
                    self._maps.popitem(last=False)
            self._maps.move_to_end(key)
            return maps


def perturbed_frame(plan: Plan, refs: References, frame: FramePlan, skipping: bool = True,
                    eps: float = EPS, interior: bool = True,
                    log2_dc_max: float | None = None, high_degree: bool = True,
                    maps: MapsCache | None = None) -> PerturbedFrame:
    """The arguments of ``frame``; ``skipping`` and ``interior`` (the early exit of
    pixels attracted to the nucleus' cycle) can be turned off for measurements.
    ``log2_dc_max`` bounds every pixel's |dc| (default: the frame's half diagonal
    beyond its reference offset; an expmap strip gives its outer radius);
    ``high_degree`` False keeps the skip maps quadratic (for measurements); ``maps``
    keeps the references' skip maps from frame to frame."""
    k = refs.frame_ref[frame.index]
    ref = refs.refs[k]
    with num.workprec(frame.bits):
        h_m, h_e = num.frexp(frame.spacing / 2)
    ox, oy = per.offset_in(plan.spec.view.center, ref.point, h_m, h_e, frame.bits)
    w, h = plan.spec.size
    if log2_dc_max is None:  # (|ref_off| + the half diagonal in half spacings) h, and a margin;
        # every sample lies inside the image (offsets in (-1/2, 1/2) px), so its |dc| is
        # below this too and the skip table holds for samples as for centres
        log2_dc_max = math.log2((math.hypot(ox, oy) + math.hypot(w, h)) * h_m * (1 + 2.0**-40)) + h_e
    table = empty_table()
    if skipping:
        fx = frame.log10_spacing < precision.PERTURB_FX_BELOW_LOG10
        # degree-4 maps (farm/numerics/highdegree.py) where a nucleus reference makes pixels
        # start its orbit again with large deltas, in double frames; they cost 2-3 times
        # the host time of a quadratic table, which long centre orbits would feel
        high = high_degree and ref.period > 0 and not fx
        orbit = frame_orbit(plan, refs, k).points.values
        table = skip_table_log2(orbit, log2_dc_max, eps, floatexp=fx, high=high,
                                log2_r_esc=math.log2(float(plan.spec.iterations.escape_radius)),
                                maps=None if maps is None else maps.get(k, orbit, high))
    lam: tuple[complex, int] = (0j, 0)
    if interior and ref.period > 0 and math.isfinite(ref.log2_scale):
        e = math.floor(ref.log2_scale) + 1
        lam = (2.0 ** (ref.log2_scale - e) * cmath.exp(1j * ref.angle), e)  # |mantissa| in [0.5, 1)
    return PerturbedFrame(k, (ox, oy), h_m, h_e, log2_dc_max, table, lam,
                          num.rotation_doubles(frame.angle))
