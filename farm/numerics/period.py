"""Reference points for perturbation, in arbitrary precision (gmpy2, MPFR), as one
namespace: what the farm's callers reach as ``per`` (``from farm.numerics import
period as per``). Each part lives in a module of its own:

* farm/numerics/mpfr_points.py: points at the depth's precision (:class:`Point`,
  parse, point, offset_in, moved, log2_distance, log2_abs);
* farm/numerics/orbiters.py: orbits at the depth's precision (on two threads at great
  depths), and a Misiurewicz point's orbit to its preperiod and one period;
* farm/numerics/newton.py: Newton's method to nuclei and Misiurewicz points;
* farm/numerics/attracting_cycles.py: attracting cycles and interior distance
  estimates;
* farm/numerics/scan.py: the scan of the view centre's orbit (periods, its fate,
  repelling cycles), which uses the others.

gmpy2 (MPFR/MPC) is about ten times faster than mpmath for the long orbits here;
farm/numerics/mpfr_threads.py calls the same MPFR through ctypes, on two threads.
Every function takes its points as decimal strings or gmpy2 numbers and a precision
in bits; it returns doubles, ints or decimal strings, so no gmpy2 number leaves these
modules except through :class:`Point`.

Notation: f_c(z) = z^2 + c, z_0 = 0, z_n = f_c^n(0); ``dz_n`` = d z_n / d c.

* Period detection (the "ball method" taken to first order): the disc of radius r
  around c is mapped by f^n to about the disc of radius r |dz_n| around z_n; the
  lowest n at which that disc holds 0 is the period of the lowest-period atom (a
  hyperbolic component and its domain) that the disc meets.
* A nucleus of period p is a root of z_p(c) = 0: Newton's method c <- c - z_p / dz_p.
* A Misiurewicz point of preperiod k and period q is a root of z_{k+q}(c) - z_k(c)
  whose orbit lands on its (repelling) q-cycle exactly at step k.
* A hyperbolic component of period p: the points c with an attracting cycle of period
  p; its multiplier lambda = (f^p)'(w) at a cycle point w has |lambda| < 1 inside.
"""

from __future__ import annotations

from farm.numerics.attracting_cycles import Cycle, attracting_cycle
from farm.numerics.handoff import preperiodic_orbit
from farm.numerics.mpfr_points import Point, log2_abs, log2_distance, moved, offset_in, parse, point
from farm.numerics.newton import cycle_multiplier, first_return, lowest_return, misiurewicz, nucleus
from farm.numerics.orbiters import (
    COMPLEX_BITS,
    ComplexOrbiter,
    GmpyOrbiter,
    ThreadedOrbiter,
    orbit,
    orbiter,
    restart,
)
from farm.numerics.scan import scan

__all__ = ["COMPLEX_BITS", "ComplexOrbiter", "Cycle", "GmpyOrbiter", "Point", "ThreadedOrbiter",
           "attracting_cycle", "cycle_multiplier", "first_return", "log2_abs", "log2_distance",
           "lowest_return", "misiurewicz", "moved", "nucleus", "offset_in", "orbit", "orbiter",
           "parse", "point", "preperiodic_orbit", "restart", "scan"]

