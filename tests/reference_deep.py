"""An independent reference for escape counts at any depth: MPFR (gmpy2) perturbation.

Below about 1e-1000 iterating every pixel at full precision (tests/reference.py) takes
hours, so this reference iterates the view centre C at full precision once and each
pixel c = C + dc as its delta d from the centre's orbit Z, in MPFR at 128 bits (MPFR's
exponent range holds any depth):

    d <- (2 Z(m) + d) d + dc,   m <- m + 1,   z = Z(m) + d

with |z|^2 > R^2 the escape (the count is DESIGN.md's), and d <- z, m <- 0 whenever
|z| < |d| (then the pixel follows the orbit from its start again). The recurrence is
exact; rounding d and the orbit's points to 128 bits perturbs each step by 2^-128 of
|d| (a rebase happens where |z| < |d|, so what it adds is as small against d), where
the farm's kernels round to 53 bits. Nothing here comes from the farm: no doubles, no
floatexp, no skipping, no nucleus or Misiurewicz reference, the pixel mapping from
exact fractions (tests/reference.py).
"""

from __future__ import annotations

import math
import sys
from fractions import Fraction

DELTA_BITS = 128
sys.set_int_max_str_digits(0)  # deep centres have more digits than int() takes by default


def centre_orbit(center: tuple[str, str], bits: int, steps: int, radius: float = 2.0) -> list:
    """Z(0) .. Z(L-1) of the centre at ``bits`` bits, each rounded to DELTA_BITS (mpc);
    L - 1 = steps, or the last n before it escapes."""
    import gmpy2
    from gmpy2 import mpc, mpfr

    out = [mpc(0, precision=DELTA_BITS)]
    with gmpy2.context(gmpy2.get_context(), precision=bits):
        cr, ci = mpfr(center[0]), mpfr(center[1])
        x = y = mpfr(0)
        r2 = mpfr(radius) ** 2
        for _ in range(steps):
            x, y = (x + y) * (x - y) + cr, 2 * x * y + ci
            if x * x + y * y > r2:
                break
            out.append(mpc(x, y, precision=DELTA_BITS))
    return out


def pixel_count(orbit: list, dc, max_iter: int, radius: float = 2.0) -> int:
    """The count of the pixel at offset ``dc`` (mpc) from the orbit's point."""
    import gmpy2
    from gmpy2 import mpc

    with gmpy2.context(gmpy2.get_context(), precision=DELTA_BITS):
        norm = gmpy2.norm
        r2 = radius * radius
        twice = [2 * z for z in orbit]
        last = len(orbit) - 1
        d, m = mpc(0), 0
        for n in range(1, max_iter + 1):
            d = (twice[m] + d) * d + dc
            m += 1
            z = orbit[m] + d
            if norm(z) > r2:
                return n
            if m == last or norm(z) < norm(d):
                d, m = z, 0
    return 0


_ORBIT: list = []


def _keep(orbit: list) -> None:
    _ORBIT[:] = orbit
    sys.set_int_max_str_digits(0)


def _row(args):
    center, width, size, max_iter, j = args
    import gmpy2
    from gmpy2 import mpc, mpfr, mpq
    from reference import pixel_c

    cre, cim = Fraction(center[0]), Fraction(center[1])
    out = []
    for i in range(size[0]):
        re, im = pixel_c(center, width, size, i, j)
        with gmpy2.context(gmpy2.get_context(), precision=DELTA_BITS):
            dre, dim = re - cre, im - cim
            dc = mpc(mpfr(mpq(dre.numerator, dre.denominator)), mpfr(mpq(dim.numerator, dim.denominator)))
        out.append(pixel_count(_ORBIT, dc, max_iter))
    return out


def deep_counts(center: tuple[str, str], width: str, size: tuple[int, int], max_iter: int,
                processes: int | None = None):
    """Counts of a whole (H, W) image at ``width`` (any depth) around ``center``: the
    centre's orbit once, then the rows spread over processes."""
    import os
    from multiprocessing import get_context

    import numpy as np

    spacing = Fraction(width) / size[0]
    bits = int(math.log2(spacing.denominator) - math.log2(spacing.numerator)) + 128
    orbit = centre_orbit(center, bits, max_iter)
    jobs = [(center, width, size, max_iter, j) for j in range(size[1])]
    procs = processes or min(len(jobs), os.cpu_count() or 1)
    if procs <= 1:
        _keep(orbit)
        return np.array([_row(job) for job in jobs])
    with get_context("spawn").Pool(procs, initializer=_keep, initargs=(orbit,)) as pool:
        return np.array(pool.map(_row, jobs))
