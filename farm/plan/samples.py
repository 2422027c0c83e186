"""Where the samples of a pixel lie: ``[image] samples = N`` (anti-aliasing).

Sample 0 is the pixel's centre, the point of the store's contract (DESIGN.md, pixel
mapping), so ``iterations`` and ``fraction`` mean what they mean without samples.
Samples 1..N-1 sit at fixed offsets from the centre, the same in every pixel of every
frame: a pure function of N, computed here in exact integer arithmetic, so every rank
and every resume places them identically.

An offset ``(ox, oy)`` is in output pixels, x to the right (+column), y down (+row);
the sample of pixel (i, j) is at ``re = cr + (i + 1/2 + ox - W/2) s``, ``im = ci -
(j + 1/2 + oy - H/2) s``. Offsets are multiples of ``2^-16`` px (:data:`UNIT`) in
``(-1/2, 1/2)``, so ``2 i + 1 - W + 2 ox`` is exact in a double (perturbation forms
each sample's offset from the view centre in doubles) and in mpmath.

The pattern (N = 2 is not allowed: no two distinct points are centred on the pixel):

* N odd: a centred rank-1 lattice, sample k at ``(frac(k/N + 1/2) - 1/2,
  frac(k g/N + 1/2) - 1/2)``. Each axis sees the N stratum midpoints ``(m + 1/2)/N -
  1/2`` exactly once (stratified in x and in y), the set is point-symmetric about the
  centre, and the generator g (coprime to N) is the one whose lattice has the largest
  smallest distance between samples, repeating across pixels (the smallest such g).
* N = 4: the centre and an equilateral triangle of radius sqrt(2)/3 around it, first
  corner at (1/3, 1/3): its mean is the centre and its second moments are the
  pixel's (1/12 per axis, 0 across), so a colour that varies linearly or
  quadratically across the pixel is averaged exactly.
* N even, 6 or more: the centred lattice of N points has one sample on the pixel's
  corner (-1/2, -1/2), which pulls the mean 1/(2N) px off the centre; samples 1..N-1
  are moved by 1/(2(N-1)) px in x and y, so that their mean is the centre again.

After rounding to the ``2^-16`` grid the last sample absorbs the rounding residue, so
the samples' mean is exactly the centre for every N.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

UNIT_BITS = 16
UNIT = 1 << UNIT_BITS  # offsets are integers in units of 2^-16 px
MAX_SAMPLES = 64


def allowed(n: int) -> bool:
    """Sample counts the spec accepts: 1, 3 .. MAX_SAMPLES."""
    return n == 1 or 3 <= n <= MAX_SAMPLES


def _toroidal_d2(a: tuple[int, int], b: tuple[int, int], n: int) -> int:
    """Squared distance (in (1/n px)^2) between lattice points, repeating every pixel."""
    dx, dy = abs(a[0] - b[0]) % n, abs(a[1] - b[1]) % n
    dx, dy = min(dx, n - dx), min(dy, n - dy)
    return dx * dx + dy * dy


def _generator(n: int) -> int:
    """The g of the best centred rank-1 lattice of n points (see module docstring)."""
    best, best_d2 = 1, -1
    for g in range(1, n):
        if math.gcd(g, n) != 1:
            continue
        # the lattice is a group: the smallest distance is the smallest |point k|
        d2 = min(_toroidal_d2((k, k * g % n), (0, 0), n) for k in range(1, n))
        if d2 > best_d2:
            best, best_d2 = g, d2
    return best


def _lattice(n: int) -> list[tuple[Fraction, Fraction]]:
    """Centred rank-1 lattice: sample 0 at (0, 0), coordinates in [-1/2, 1/2)."""
    g = _generator(n) if n > 1 else 1

    def centred(k: int) -> Fraction:
        return (Fraction(k, n) + Fraction(1, 2)) % 1 - Fraction(1, 2)

    return [(centred(k), centred(k * g % n)) for k in range(n)]


def _triangle() -> list[tuple[Fraction, Fraction]]:
    """Centre, then (1/3, 1/3) turned by 0, 120 and 240 degrees; sqrt(3) to 64 bits."""
    r3 = Fraction(math.isqrt(3 << 128), 1 << 64)
    a, b = (1 + r3) / 6, (r3 - 1) / 6  # (1/3, 1/3) turned by 120: (-a, b); by 240: (b, -a)
    third = Fraction(1, 3)
    return [(Fraction(0), Fraction(0)), (third, third), (-a, b), (b, -a)]


def _exact(n: int) -> list[tuple[Fraction, Fraction]]:
    if n == 4:
        return _triangle()
    pts = _lattice(n)
    if n % 2 == 0:
        v = Fraction(1, 2 * (n - 1))
        pts = [pts[0]] + [(x + v, y + v) for x, y in pts[1:]]
    return pts


@functools.cache
def offsets(n: int) -> tuple[tuple[int, int], ...]:
    """The N sample offsets ``(ox, oy)`` in units of 2^-16 px (x right, y down);
    ``offsets(n)[0] == (0, 0)``, the pixel centre; their sum is (0, 0)."""
    if not allowed(n):
        raise ValueError(f"{n} samples per pixel is not allowed (1, or 3 to {MAX_SAMPLES})")
    pts = [[round(x * UNIT), round(y * UNIT)] for x, y in _exact(n)]
    if n > 1:
        pts[-1][0] -= sum(p[0] for p in pts)
        pts[-1][1] -= sum(p[1] for p in pts)
    out = tuple((x, y) for x, y in pts)
    assert out[0] == (0, 0) and all(-UNIT // 2 < c < UNIT // 2 for p in out for c in p)
    return out


def offsets_px(n: int) -> list[tuple[float, float]]:
    """The offsets in pixels as floats (exact: multiples of 2^-16), for plots and tests."""
    return [(x / UNIT, y / UNIT) for x, y in offsets(n)]
