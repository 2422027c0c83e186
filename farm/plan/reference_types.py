"""What a reference is: one reference orbit (:class:`Reference`), a plan's distinct
references with each frame's (:class:`References`), and what becomes of the view
centre's own orbit (:class:`Fate`).

Chosen by farm/plan/references.py, their orbits computed by
farm/plan/reference_orbits.py, packed for the store and MPI by
farm/plan/reference_pack.py. This module imports no arbitrary-precision library:
colouring a store's frames (farm encode, frames) needs only these classes, and
mpmath and gmpy2 take 40-60 ms to import.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from farm.numerics.mpfr_points import Point
    from farm.numerics.orbit import Orbit


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

    point: Point
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
