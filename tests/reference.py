"""An independent reference for escape counts: mpmath at 200 digits, straight from
the contracts in DESIGN.md (pixel mapping with exact rationals, z(k+1) = z(k)^2 + c).
Turned views (a rotation angle) map pixels with mpmath's own cos and sin of the angle
in radians, at the reference's precision (turned_sample_c): no farm code."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath

DIGITS = 200


def pixel_c(center: tuple[str, str], width: str, size: tuple[int, int], i: int, j: int):
    """c of pixel (column i, row j) as exact Fractions: the DESIGN.md mapping."""
    w, h = size
    s = Fraction(width) / w
    re = Fraction(center[0]) + (i + Fraction(1, 2) - Fraction(w, 2)) * s
    im = Fraction(center[1]) - (j + Fraction(1, 2) - Fraction(h, 2)) * s
    return re, im


def escape_count(re: Fraction, im: Fraction, max_iter: int, radius: float = 2.0,
                 digits: int = DIGITS) -> int:
    """Smallest n >= 1 with |z(n)|^2 > R^2, else 0."""
    with mpmath.workdps(digits):
        cr = mpmath.mpf(re.numerator) / re.denominator
        ci = mpmath.mpf(im.numerator) / im.denominator
        r2 = mpmath.mpf(radius) ** 2
        x = y = xx = yy = mpmath.mpf(0)
        for n in range(1, max_iter + 1):
            y = (x + x) * y + ci
            x = xx - yy + cr
            xx, yy = x * x, y * y
            if xx + yy > r2:
                return n
    return 0


def escape_count_mpfr(re: Fraction, im: Fraction, max_iter: int, radius: float = 2.0,
                      digits: int = DIGITS) -> int:
    """:func:`escape_count` in MPFR (gmpy2), about ten times faster than mpmath, for the
    long orbits of deep minibrot views: the same contract, the same precision."""
    import gmpy2

    bits = int(digits * 3.33) + 8
    with gmpy2.context(gmpy2.get_context(), precision=bits):
        cr = gmpy2.mpfr(gmpy2.mpq(re.numerator, re.denominator))
        ci = gmpy2.mpfr(gmpy2.mpq(im.numerator, im.denominator))
        r2 = gmpy2.mpfr(radius) ** 2
        x = y = xx = yy = gmpy2.mpfr(0)
        for n in range(1, max_iter + 1):
            y = 2 * x * y + ci
            x = xx - yy + cr
            xx, yy = x * x, y * y
            if xx + yy > r2:
                return n
    return 0


def digits_for(width: str, size: tuple[int, int]) -> int:
    """200 digits, or more for views whose pixels are finer than 1e-140."""
    spacing = Fraction(width) / size[0]  # its float would be 0 below 1e-308: log the ints
    return max(DIGITS, int(math.log10(spacing.denominator) - math.log10(spacing.numerator)) + 60)


def _row(args):
    center, width, size, max_iter, radius, j, mpfr = args
    digits = digits_for(width, size)
    count = escape_count_mpfr if mpfr else escape_count
    return [count(*pixel_c(center, width, size, i, j), max_iter, radius, digits)
            for i in range(size[0])]


def reference_counts(center, width, size, max_iter, radius=2.0, processes=None, mpfr=False):
    """Counts of a whole image as an (H, W) array, at 200 digits (more for views below
    1e-140), in mpmath or (``mpfr``) MPFR; rows are spread over processes."""
    import os
    from multiprocessing import get_context

    import numpy as np

    jobs = [(center, width, size, max_iter, radius, j, mpfr) for j in range(size[1])]
    procs = processes or min(len(jobs), os.cpu_count() or 1)
    if procs <= 1:
        return np.array([_row(job) for job in jobs])
    with get_context("spawn").Pool(procs) as pool:
        return np.array(pool.map(_row, jobs))


def misiurewicz(guess: str | tuple[str, str], preperiod: int, period: int, digits: int):
    """A Misiurewicz point c (f^(k+p)(0) = f^k(0)) near ``guess`` by Newton's method, as
    decimal strings of ``digits`` digits: deep test views need centres this exact."""
    with mpmath.workdps(digits + 20):
        c = mpmath.mpc(*guess) if isinstance(guess, tuple) else mpmath.mpc(guess)
        for _ in range(200):
            z = dz = mpmath.mpc(0)
            zk = dzk = None
            for n in range(1, preperiod + period + 1):
                dz = 2 * z * dz + 1
                z = z * z + c
                if n == preperiod:
                    zk, dzk = z, dz
            step = (z - zk) / (dz - dzk)
            c -= step
            if abs(step) < mpmath.mpf(10) ** -(digits + 10):
                break
        return mpmath.nstr(c.real, digits, strip_zeros=False), mpmath.nstr(c.imag, digits, strip_zeros=False)


def sample_c(center: tuple[str, str], width: str, size: tuple[int, int], i: int, j: int,
             offset: tuple[int, int], unit: int = 1 << 16):
    """c of the sample at ``offset`` (units of 1/unit px, x right, y down) of pixel
    (column i, row j), as exact Fractions (DESIGN.md's mapping, moved by the offset)."""
    w, h = size
    s = Fraction(width) / w
    re = Fraction(center[0]) + (i + Fraction(1, 2) + Fraction(offset[0], unit) - Fraction(w, 2)) * s
    im = Fraction(center[1]) - (j + Fraction(1, 2) + Fraction(offset[1], unit) - Fraction(h, 2)) * s
    return re, im


def distance_estimate(re: Fraction, im: Fraction, max_iter: int, spacing: Fraction,
                      radius: float = 2.0, digits: int = DIGITS) -> tuple[int, complex]:
    """(count, distance) of c = re + i im, straight from the definitions: z(k+1) = z(k)^2
    + c and z'(k+1) = 2 z(k) z'(k) + 1 from 0 at ``digits`` digits; the count as in
    escape_count; then z, z' at the first N with |z(N)| > 2^10, and the distance estimate
    conj(z ln|z| / (spacing z')) in pixels (kernels/mandel.cl); (0, 0j) for interior."""
    with mpmath.workdps(digits):
        c = mpmath.mpc(mpmath.mpf(re.numerator) / re.denominator,
                       mpmath.mpf(im.numerator) / im.denominator)
        r2 = mpmath.mpf(radius) ** 2
        z = dz = mpmath.mpc(0)
        count = 0
        for k in range(1, max_iter + 34):
            dz = 2 * z * dz + 1
            z = z * z + c
            m2 = z.real ** 2 + z.imag ** 2
            if not count and m2 > r2:
                if k > max_iter:
                    return 0, 0j
                count = k
            if count and m2 > 2 ** 20:
                d = z * mpmath.log(abs(z)) / (dz * (mpmath.mpf(spacing.numerator) / spacing.denominator))
                return count, complex(mpmath.conj(d))
    return 0, 0j


def turned_sample_c(center: tuple[str, str], width: str, size: tuple[int, int], angle: float,
                    i: int, j: int, offset: tuple[int, int] = (0, 0), unit: int = 1 << 16,
                    digits: int = DIGITS):
    """c of the sample at ``offset`` (units of 1/unit px, x right, y down) of pixel
    (column i, row j) of a view turned by ``angle`` degrees counter-clockwise, as exact
    Fractions of ``digits``-digit numbers: c = centre + s e^(i theta) (u + i v), with u
    = i + 1/2 + ox - W/2, v = -(j + 1/2 + oy - H/2) (the README's turned mapping),
    cos and sin taken in mpmath from theta = angle pi / 180."""
    w, h = size
    u = Fraction(2 * i + 1 - w, 2) + Fraction(offset[0], unit)
    v = -(Fraction(2 * j + 1 - h, 2) + Fraction(offset[1], unit))
    with mpmath.workdps(digits + 20):
        theta = mpmath.mpf(repr(float(angle))) * mpmath.pi / 180
        c, s = mpmath.cos(theta), mpmath.sin(theta)
        step = mpmath.mpf(width) / w
        uu = mpmath.mpf(u.numerator) / u.denominator
        vv = mpmath.mpf(v.numerator) / v.denominator
        re = mpmath.mpf(center[0]) + step * (uu * c - vv * s)
        im = mpmath.mpf(center[1]) + step * (uu * s + vv * c)
        return _fraction(re), _fraction(im)


def _fraction(x) -> Fraction:
    man, exp = x.man_exp
    man = -int(man) if x < 0 else int(man)
    return Fraction(man * 2 ** exp) if exp >= 0 else Fraction(man, 2 ** -exp)


def _turned_row(args):
    center, width, size, angle, max_iter, j = args
    digits = digits_for(width, size)
    return [escape_count_mpfr(*turned_sample_c(center, width, size, angle, i, j, digits=digits),
                              max_iter, digits=digits) for i in range(size[0])]


def turned_reference_counts(center, width, size, angle, max_iter, processes=None):
    """Counts (H, W) of a view turned by ``angle`` degrees (:func:`turned_sample_c`), in
    MPFR at 200 digits (more below 1e-140); rows spread over processes."""
    import os
    from multiprocessing import get_context

    import numpy as np

    jobs = [(center, width, size, angle, max_iter, j) for j in range(size[1])]
    procs = processes or min(len(jobs), os.cpu_count() or 1)
    if procs <= 1:
        return np.array([_turned_row(job) for job in jobs])
    with get_context("spawn").Pool(procs) as pool:
        return np.array(pool.map(_turned_row, jobs))
