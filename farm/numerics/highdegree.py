"""Skip maps of degree 4: skipping where a pixel's delta is too large for quadratic maps.

The quadratic maps of farm/numerics/bla.py drop terms of degree 3, a relative error of
about (|d| / |Z|)^2, so at eps = 2^-53 they serve deltas below about 1e-8 of |Z|. After
a wrap at a minibrot's nucleus a pixel starts the orbit again with a delta of 1e-9 to
1e-5 of |Z| and takes most of its loop passes there, one step each (BENCHMARKS.md,
"Where the passes go"). Maps that keep the terms of degrees 3 and 4 as well,

    d' = A d + B c + C d^2 + D d c + E c^2 + F d^3 + G d^2 c + H d c^2 + I c^3
         + J d^4 + K d^3 c + L d^2 c^2 + M d c^3 + N c^4

(c = dc; ``TERMS`` lists the (power of d, power of c) of A .. N) drop terms of degree
5, about (|d| / |Z|)^4, and serve deltas up to about 1e-4 of |Z|. (Maps of degree 3
served up to about 1e-5: on the Seahorse frame at 1e-22 the GPU's loop, skips from 8
steps, took 693 passes a pixel with them and 431 with these, in benchmarks/passes.py's
model; degree 5 would take 388.)

**Error model** (a different one from bla.py's bound, and stated as such): the terms of
degree 5 of a map are computed exactly (maps are composed keeping degree 5, which the
degrees below do not depend on), and a map is valid for |d| < R where they are at most
eps of its linear part:

    sum over a + b = 5 of |P_ab| R^a c^b  <=  eps max(|A| R, |B| c)

(c: the frame's largest |dc|). The terms of degree 6 and more are not bounded; within R
they are smaller again by about the same factor as degree 5 is against degree 4,
which tests/test_bla.py checks against exact mpmath steps. Besides, a map must never
skip over a step where the plain loop would rebase or escape: its radius is cut so
that the delta at every step it passes stays below 2^-10 |Z(k)| (no rebase, |Z + d| >
|d|) and below (R_esc - |Z(k)|) / 2 (no escape), through its halves: R(M) <= R(first
half), and the first half sends |d| < R(M) to a delta below the second half's radius
and that middle step's own bound. The radius taken is the larger of this one and the
quadratic map's (bla.py): a row holds the degree-4 map where it serves larger deltas,
the quadratic one (F .. N = 0) elsewhere, for instance where the long maps'
coefficients leave double's range at great depths. Both radii shrink with the level,
so validity stays monotone in it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

KEEP = 4  # the maps keep the terms of degrees 1 to KEEP
DEGREE = KEEP + 1  # carried while composing: the error model's terms
# (power of d, power of dc) of the coefficients A .. N, by degree, d's power first
TERMS = tuple((a, n - a) for n in range(1, KEEP + 1) for a in range(n, -1, -1))
INNER_LOG2 = -10.0  # the delta at a skipped step stays below 2^-10 |Z| there


def _mul(p: dict, q: dict) -> dict:
    """The product of two polynomials in (d, c), each {(a, b): coefficient array},
    without terms above DEGREE."""
    out: dict = {}
    for (a1, b1), x in p.items():
        for (a2, b2), y in q.items():
            if a1 + b1 + a2 + b2 <= DEGREE:
                k = (a1 + a2, b1 + b2)
                out[k] = out[k] + x * y if k in out else x * y
    return out


def compose(first: dict, second: dict) -> dict:
    """second(first(d, c), c), without terms above DEGREE."""
    n = len(next(iter(first.values())))
    out: dict = {}
    power = {(0, 0): np.ones(n, dtype=np.complex128)}  # first^a
    for a in range(DEGREE + 1):
        if a:
            power = _mul(power, first)
        for b in range(DEGREE + 1 - a):
            coef = second.get((a, b))
            if coef is None:
                continue
            for (pa, pb), v in power.items():
                if pa + pb + b <= DEGREE:
                    k = (pa, pb + b)
                    out[k] = out[k] + coef * v if k in out else coef * v
    return out


@dataclass(frozen=True)
class Level:
    """The degree-4 maps of one level, before a frame's |dc| bound is known: ``rows``
    (n, 28) float64, A .. N as (re, im) pairs (the table's rows, bla.py); ``finite``
    (n,) whether they fit doubles; ``dropped`` and ``landing`` {(a, b): log2 |P_ab|},
    the map's terms of degree DEGREE and its first half's terms of degrees 1 to DEGREE;
    ``log2_a``, ``log2_b``: log2 |A|, log2 |B|."""

    rows: np.ndarray
    finite: np.ndarray
    dropped: dict
    landing: dict
    log2_a: np.ndarray
    log2_b: np.ndarray


def _logs(poly: dict, degrees: range) -> dict:
    with np.errstate(divide="ignore"):
        return {k: np.log2(np.abs(v)) for k, v in poly.items() if sum(k) in degrees}


def _by_power(logs: dict, lc: float, n: int) -> np.ndarray:
    """(DEGREE + 1, n): row a is log2 of the sum over b of |P_ab| c^b (c = 2^lc), so
    that the terms' sum at rho = 2^lr is the sum over a of 2^(row a + a lr)."""
    out = np.full((DEGREE + 1, n), -np.inf)
    for (a, b), v in logs.items():
        out[a] = np.logaddexp2(out[a], v + b * lc)
    return out


def _at_most(rows: np.ndarray, lr: np.ndarray, bound: np.ndarray) -> np.ndarray:
    """Whether sum over a of 2^(rows[a] + a lr) <= 2^bound (NaN: no)."""
    powers = np.arange(DEGREE + 1)[:, None]
    with np.errstate(over="ignore", invalid="ignore"):
        return np.exp2(rows + powers * lr - bound).sum(axis=0) <= 1.0


def _largest(ok, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """log2 of the largest rho in [2^lo, 2^hi] with ok(log2 rho) (a test that holds
    for small rho and fails from some rho on), by bisection until every interval is
    within 2^-6 of an octave (1.1% of the radius; from below: the result always
    passes); -inf where even 2^lo fails."""
    a, b = lo, hi
    widest = float(np.max(hi - lo, initial=0.0))
    for _ in range(max(0, math.ceil(math.log2(max(widest, 1.0))) + 6)):
        mid = 0.5 * (a + b)
        good = ok(mid)
        a, b = np.where(good, mid, a), np.where(good, b, mid)
    return np.where(ok(a), a, -np.inf)


def step_bounds(orbit: np.ndarray, log2_r_esc: float) -> np.ndarray:
    """log2 of the largest delta allowed at each step k of the orbit when a skip passes
    it: min(2^-10 |Z(k)|, (R_esc - |Z(k)|) / 2)."""
    z = np.hypot(orbit[:, 0], orbit[:, 1])
    with np.errstate(divide="ignore"):
        return np.minimum(INNER_LOG2 + np.log2(z),
                          np.log2(np.maximum(2.0**log2_r_esc - z, 0.0) / 2))


def compositions(orbit: np.ndarray, count: int) -> list[Level]:
    """The degree-4 maps of levels 1 .. ``count`` (maps of 2^j steps from steps
    1 + k 2^j, as in bla.py) of a reference orbit: what does not depend on the frame."""
    z = orbit[:, 0] + 1j * orbit[:, 1]
    steps = len(z) - 2
    one = np.ones(steps, dtype=np.complex128)
    poly = {(1, 0): 2.0 * z[1:1 + steps], (0, 1): one, (2, 0): one}
    out = []
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        for _ in range(count):
            n = len(poly[(1, 0)]) // 2
            first = {k: v[0:2 * n:2] for k, v in poly.items()}
            poly = compose(first, {k: v[1:2 * n:2] for k, v in poly.items()})
            coef = np.stack([poly.get(t, np.zeros(n, dtype=np.complex128)) for t in TERMS], axis=1)
            rows = np.stack([coef.real, coef.imag], axis=2).reshape(n, 2 * len(TERMS))
            out.append(Level(rows, np.asarray(np.isfinite(coef).all(axis=1)),
                             _logs(poly, range(DEGREE, DEGREE + 1)),
                             _logs(first, range(1, DEGREE + 1)),
                             np.log2(np.abs(poly[(1, 0)])), np.log2(np.abs(poly[(0, 1)]))))
    return out


def levels(orbit: np.ndarray, maps: list[Level], log2_c: float, eps: float, log2_r_esc: float,
           quad_log2_radii: list[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per level j >= 1: (the maps' rows, Level.rows; log2 of their radii by the error
    model above) for a frame's largest |dc| 2^log2_c, given the orbit's
    ``compositions`` and the quadratic maps' log2 radii of each level (the halves of a
    map may be quadratic ones)."""
    steps = len(orbit) - 2
    bound = step_bounds(orbit, log2_r_esc)[1:1 + steps + 1]  # bound[i]: step i + 1
    reach = np.full(steps, np.inf)  # single steps pass no step of their own
    out = []
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        for j, (level, quad) in enumerate(zip(maps, quad_log2_radii, strict=True), start=1):
            n = len(quad)  # the levels halve alike here and in bla.py
            # the step between the halves: map k starts at bound index k 2^j
            middle = bound[np.arange(n) * (1 << j) + (1 << (j - 1))]
            inner = np.minimum(middle, reach[1:2 * n:2])
            lin_a, lin_b = level.log2_a, level.log2_b + log2_c
            dropped = _by_power(level.dropped, log2_c, n)
            landing = _by_power(level.landing, log2_c, n)

            def valid(lr, dropped=dropped, landing=landing, inner=inner, lin_a=lin_a, lin_b=lin_b):
                err_ok = _at_most(dropped, lr, math.log2(eps) + np.maximum(lin_a + lr, lin_b))
                return err_ok & _at_most(landing, lr, inner)

            # the search starts at the quadratic map's radius: a degree-4 map is only
            # taken where it serves larger deltas (and radii stay below 2^4); it ends 24
            # octaves above (degree-4 radii come out 2^5 to 2^22 times the quadratic ones
            # on the Seahorse's period-8007 orbit)
            known = np.isfinite(quad)
            lo = np.where(known, np.maximum(quad, -1100.0), -1100.0)
            lr = np.minimum(_largest(valid, lo, np.where(known, lo + 24.0, 4.0)), reach[0:2 * n:2])
            lr = np.where(level.finite & np.isfinite(lin_a), lr, -np.inf)
            out.append((level.rows, lr))
            # the radius a map of this level is taken with: the larger of the two
            reach = np.maximum(lr, quad)
    return out
