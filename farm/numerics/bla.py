"""Skip tables: many perturbation steps at once, by maps that are quadratic in the delta.

A pixel at reference step m iterates d <- 2 Z(m) d + d^2 + dc (kernels/perturb.cl).
That step is exactly quadratic in (d, dc); composing steps and keeping terms up to the
second degree gives, for l steps from m,

    d' = A d + B dc + C d^2 + D d dc + E dc^2        (one step: A = 2 Z(m), B = C = 1)

Two maps (1 then 2) compose as

    A = A2 A1                   B = A2 B1 + B2          C = A2 C1 + C2 A1^2
    D = A2 D1 + 2 C2 A1 B1 + D2 A1                      E = A2 E1 + C2 B1^2 + D2 B1 + E2

**Error model.** Composition drops terms of degree 3 and 4. Inside a map, write the
delta at its k-th intermediate step as L_k + Q_k + ..., the linear and quadratic parts in
(d, dc) of the map so far. Step k then drops 2 L_k Q_k + Q_k^2 of its exact d_k^2, next
to its linear output 2 Z(k) L_k: a relative error of about |Q_k| / |Z(k)|, carried on
unchanged (relative to d) by the following linear steps. A map's relative error is
therefore bounded by

    err(rho) = sum_k |Q_k| / |Z(k)| <= a rho^2 + b rho c + g c^2

for |d| <= rho and |dc| <= c (c: the frame's largest |dc|), where a, b, g are the sums
over the intermediate steps k of |C_k| / |Z(k)|, |D_k| / |Z(k)|, |E_k| / |Z(k)| (C_k ..:
the coefficients of the map from its start to k). They compose with one more sum,
alpha = sum_k |A_k| / |Z(k)| (from the start, k included):

    alpha = alpha1 + |A1| alpha2
    a = a1 + |C1| alpha2 + |A1|^2 a2
    b = b1 + |D1| alpha2 + 2 |A1| |B1| a2 + |A1| b2
    g = g1 + |E1| alpha2 + |B1|^2 a2 + |B1| b2 + g2

A map is valid for |d| < R, the largest rho with each of its three terms at most eps/3
(so err(R) <= eps), R = 0 when g c^2 > eps/3. eps = 2^-53: a skip adds at most about
one double rounding (relative) to the delta it lands with, as much as a single step of
the plain loop does. Since a, b, g only grow as maps compose, a map's radius never
exceeds that of the first half it is made of, so validity is monotone in the level.
Small error terms also keep every intermediate |d_k| far below |Z(k)|: no rebase or
escape is skipped over.

With linear maps alone (C = D = E = 0, the classic bilinear approximation), the error
of a step is |d| / |2 Z| itself, so the same accuracy allows deltas only up to about
2^-53 |Z|, against about 2^-27 |Z| here; measured on the Seahorse frame at 1e-22 (640x360,
max 50000, period-8007 reference), linear maps at eps 2^-53 skip nothing worth having,
and eps 2^-40 gives 2.9x fewer steps but only 98.7% of counts equal to the plain loop,
while these maps take 6.9x fewer steps at 99.7% (BENCHMARKS.md).

**Table layout.** Level j holds the maps of 2^j steps starting at steps m = 1 + k 2^j
(k = 0, 1, ...), ending at or before the orbit's last step L-1 (step 0 has Z = 0 and is
never skipped; for a nucleus of period p, L - 1 = p: maps run up to the period, and the
pixel wraps to Z(0) at p with one exact step). Level 0 (single steps) is left empty: a
single step is the loop's own. Quadratic coefficients whose terms are negligible at the
map's radius (below 2^-64 of the linear ones) are stored as 0, so that deep maps stay
representable; maps whose coefficients still do not fit a double get radius 0, and so
do maps across a step whose |Z| is below 2^-960 (an orbit near 0 at great depth: in a
double such a Z has lost bits or underflowed; the floatexp kernel steps there one at a
time with Z's exponent, farm/numerics/orbit.py). Frames
with pixel spacings below 1e-305 (floatexp deltas) get the same table with log2 radii
(``log2_radii``): their radii span more than a double's range. The kernels read the
table in another order, one map a row at the middle of the steps it covers, with radii
for max(|d.re|, |d.im|) (``device_layout``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from farm.numerics import highdegree as hd

EPS = 2.0**-53
COLUMNS = 2 * len(hd.TERMS)  # a map's 14 coefficients A .. N as (re, im) pairs (F .. N: highdegree.py)
NEGLIGIBLE_LOG2 = -64.0  # quadratic terms below 2^-64 of the linear ones are dropped
TINY = 2.0**-960  # a map across a step whose |Z| is below this is never valid (see below)


@dataclass(frozen=True)
class SkipTable:
    """The maps of one frame's reference orbit.

    coef     (N, 28) float64: A .. N of each map (farm/numerics/highdegree.py: TERMS) as
             (re, im) pairs (F .. N, the terms of degrees 3 and 4, 0 in quadratic maps)
    radius   (N,) float64: the map is valid for |d| < radius (0: never); its log2
             (-inf: never) when ``log2_radii``
    offsets  (levels + 1,) uint32: level j's maps are rows offsets[j] .. offsets[j+1] - 1
    shift    k: for every map at step m, its radius <= 2^-(k+1) max(|Z(m).re|, |Z(m).im|),
             the kernel's cheap pre-check (see _with_shift)
    """

    coef: np.ndarray
    radius: np.ndarray
    offsets: np.ndarray
    log2_radii: bool = False
    shift: int = 0

    @property
    def levels(self) -> int:
        return len(self.offsets) - 1

    @property
    def valid(self) -> np.ndarray:
        """(N,) bool: the maps that can be taken at all."""
        return self.radius > (-np.inf if self.log2_radii else 0.0)


def empty_table() -> SkipTable:
    """No skipping (the kernel needs buffers all the same)."""
    return SkipTable(np.zeros((1, COLUMNS)), np.zeros(1), np.zeros(2, dtype=np.uint32))


def _log2abs(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log2(np.abs(x))


def _lsum(*terms: np.ndarray) -> np.ndarray:
    """log2 of the sum of 2^t over the terms (-inf terms are zeros)."""
    out = terms[0]
    for t in terms[1:]:
        out = np.logaddexp2(out, t)
    return out


def _merge(m1: dict, m2: dict) -> dict:
    """The map m2 after m1: its coefficients, their log2 magnitude bounds (lC, lD, lE,
    finite where the complex values overflow) and the log2 error sums (lal, la, lb, lg)."""
    A1, B1, C1, D1, E1 = (m1[k] for k in "ABCDE")
    A2, B2, C2, D2, E2 = (m2[k] for k in "ABCDE")
    lA1, lB1 = _log2abs(A1), _log2abs(B1)
    lC1, lD1, lE1 = m1["lC"], m1["lD"], m1["lE"]
    return {
        "A": A2 * A1, "B": A2 * B1 + B2,
        "C": A2 * C1 + (C2 * A1) * A1,
        "D": A2 * D1 + 2 * (C2 * A1) * B1 + D2 * A1,
        "E": A2 * E1 + (C2 * B1) * B1 + D2 * B1 + E2,
        # log2 magnitudes of C, D, E bounded without overflow (the complex values may
        # overflow where the map is long; their logs stay finite)
        "lC": _lsum(_log2abs(A2) + lC1, m2["lC"] + 2 * lA1),
        "lD": _lsum(_log2abs(A2) + lD1, 1 + m2["lC"] + lA1 + lB1, m2["lD"] + lA1),
        "lE": _lsum(_log2abs(A2) + lE1, m2["lC"] + 2 * lB1, m2["lD"] + lB1, m2["lE"]),
        "lal": _lsum(m1["lal"], lA1 + m2["lal"]),
        "la": _lsum(m1["la"], lC1 + m2["lal"], 2 * lA1 + m2["la"]),
        "lb": _lsum(m1["lb"], lD1 + m2["lal"], 1 + lA1 + lB1 + m2["la"], lA1 + m2["lb"]),
        "lg": _lsum(m1["lg"], lE1 + m2["lal"], 2 * lB1 + m2["la"], lB1 + m2["lb"], m2["lg"]),
        "tiny": m1["tiny"] | m2["tiny"],
    }


def _radius_log2(level: dict, log2_c: float, eps: float) -> np.ndarray:
    """log2 of the largest rho with a rho^2, b rho c and g c^2 each at most eps/3
    (c = 2^log2_c); -inf where no rho works."""
    le = math.log2(eps / 3)
    lr = np.minimum(0.5 * (le - level["la"]), le - level["lb"] - log2_c)
    return np.where(level["lg"] + 2 * log2_c <= le, lr, -np.inf)


def skip_table(orbit: np.ndarray, dc_max: float, eps: float = EPS) -> SkipTable:
    """The skip table of an (L, 2) float64 orbit Z(0) .. Z(L-1) for deltas |dc| <=
    ``dc_max`` (double deltas)."""
    return skip_table_log2(orbit, math.log2(dc_max), eps)


@dataclass(frozen=True)
class OrbitMaps:
    """A reference orbit's maps before any frame's |dc| bound is known: the costly part
    of a skip table, built once per reference and shared by its frames (only the radii
    depend on the frame). ``quadratic``: levels 1 .. of _merge; ``high``: the
    degree-4 maps of those levels (farm/numerics/highdegree.py), or None."""

    orbit: np.ndarray
    quadratic: list
    high: list | None


def orbit_maps(orbit: np.ndarray, high: bool) -> OrbitMaps:
    """The maps of an (L, 2) float64 orbit, with degree-4 ones if ``high``."""
    z = orbit[:, 0] + 1j * orbit[:, 1]
    steps = max(len(z) - 2, 0)  # maps m -> m + 1 for m = 1 .. L - 2 (Z(m + 1) must exist)
    zm = z[1:1 + steps]
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        one = np.ones(steps, dtype=np.complex128)
        zero = np.zeros(steps, dtype=np.complex128)
        ninf = np.full(steps, -np.inf)
        level = {"A": 2.0 * zm, "B": one, "C": one, "D": zero, "E": zero,
                 "lC": np.zeros(steps), "lD": ninf, "lE": ninf,
                 "lal": -_log2abs(zm), "la": ninf, "lb": ninf, "lg": ninf,
                 "tiny": np.abs(zm) < TINY}
        levels = []
        while len(level["A"]) >= 2:
            n = len(level["A"]) // 2
            level = _merge({k: v[0:2 * n:2] for k, v in level.items()},
                           {k: v[1:2 * n:2] for k, v in level.items()})
            levels.append(level)
    return OrbitMaps(orbit, levels, hd.compositions(orbit, len(levels)) if high else None)


def skip_table_log2(orbit: np.ndarray, log2_dc_max: float, eps: float = EPS,
                    floatexp: bool = False, high: bool | None = None,
                    log2_r_esc: float = 1.0, maps: OrbitMaps | None = None) -> SkipTable:
    """:func:`skip_table` with the largest |dc| given as its log2 (any depth); log2
    radii for ``floatexp`` deltas. ``high`` (default: for double deltas) adds the
    degree-4 maps of farm/numerics/highdegree.py where they serve larger deltas; the
    escape radius 2^log2_r_esc bounds them (no skip passes an escape). ``maps``: the
    orbit's :func:`orbit_maps`, built with the same ``high``, if already at hand."""
    if high is None:
        high = not floatexp
    if maps is None:
        maps = orbit_maps(orbit, high)
    elif maps.orbit is not orbit or (maps.high is not None) != high:
        raise ValueError("skip maps built for another orbit or degree")
    if not maps.quadratic:
        return empty_table()
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        finished = [_finish_level(lv, log2_dc_max, eps) for lv in maps.quadratic]
        if maps.high is not None:
            high4 = hd.levels(orbit, maps.high, log2_dc_max, eps, log2_r_esc,
                               [lr for _, lr in finished])
            finished = [_with_high(q, c) for q, c in zip(finished, high4, strict=True)]
        rows, radii = [np.zeros((0, COLUMNS))], [np.zeros(0)]  # level 0: single steps, not stored
        for (coef, lr), level in zip(finished, maps.quadratic, strict=True):
            lr = np.where(level["tiny"], -np.inf, lr)  # across a Z below 2^-960: never
            rows.append(coef)
            radii.append(lr if floatexp else np.exp2(lr))
    offsets = np.cumsum([0] + [len(r) for r in radii]).astype(np.uint32)
    table = SkipTable(np.ascontiguousarray(np.concatenate(rows)),
                      np.ascontiguousarray(np.concatenate(radii)), offsets, floatexp)
    return _with_shift(orbit, table)


def _with_high(quad: tuple[np.ndarray, np.ndarray],
               high: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """One level's rows: each map's degree-4 version (14 coefficients, its radius)
    where its radius is the larger, else the quadratic one with F .. N = 0 (written into
    the quadratic rows, which each frame makes anew)."""
    qcoef, qlr = quad
    hrows, hlr = high
    take = hlr > qlr
    qcoef[take] = hrows[take]
    return qcoef, np.where(take, hlr, qlr)


def _finish_level(lv: dict, log2_c: float, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """(coef (n, COLUMNS), F .. N = 0; log2 radii) of one level: negligible quadratic
    terms dropped (|C| R^2, |D| R c, |E| c^2 against |A| R + |B| c), maps that do not
    fit doubles invalid (-inf)."""
    lr = _radius_log2(lv, log2_c, eps)
    coef = np.stack([lv[k] for k in "ABCDE"], axis=1)
    lin = _lsum(_log2abs(lv["A"]) + lr, _log2abs(lv["B"]) + log2_c)
    quad = _lsum(lv["lC"] + 2 * lr, lv["lD"] + lr + log2_c, lv["lE"] + 2 * log2_c)
    coef[:, 2:] = np.where((quad - lin < NEGLIGIBLE_LOG2)[:, None], 0, coef[:, 2:])
    ok = np.isfinite(coef).all(axis=1) & np.isfinite(lr)
    coef[~ok] = 0
    lr = np.where(ok, lr, -np.inf)
    out = np.zeros((len(coef), COLUMNS))
    out[:, :10] = np.stack([coef.real, coef.imag], axis=2).reshape(len(coef), 10)
    return out, lr


def _gaps(orbit: np.ndarray, table: SkipTable) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per level j >= 1: (rows of valid maps, log2 max(|Z.re|, |Z.im|) at their start
    minus log2 of their radius)."""
    big = np.maximum(np.abs(orbit[:, 0]), np.abs(orbit[:, 1]))
    out = []
    for j in range(1, table.levels):
        rows = np.arange(table.offsets[j], table.offsets[j + 1])
        ok = table.valid[rows]
        r = table.radius[rows[ok]]
        lr = r if table.log2_radii else np.log2(r)
        with np.errstate(divide="ignore"):
            gap = np.log2(big[1 + np.flatnonzero(ok) * 2**j]) - lr
        out.append((rows[ok], gap))
    return out


def _with_shift(orbit: np.ndarray, table: SkipTable) -> SkipTable:
    """The table with its pre-check shift k: every radius at most 2^-(k+1) max(|Z.re|,
    |Z.im|) at its start (one halving more than the bound needs, for the kernel's
    high-word compare). k is the 2nd percentile of the maps' gaps (less one): the few
    maps with larger radii are cut to it (they lose a level at most, and the kernel's
    cheap filter stays tight), 0 <= k <= 60."""
    gaps = _gaps(orbit, table)
    every = np.concatenate([g for _, g in gaps]) if gaps else np.zeros(0)
    if len(every) == 0:
        return SkipTable(table.coef, table.radius, table.offsets, table.log2_radii, 0)
    k = int(min(60, max(0, math.floor(np.percentile(every, 2)) - 1)))
    radius = table.radius.copy()
    for rows, gap in gaps:
        cut = gap < k + 1
        if table.log2_radii:
            radius[rows[cut]] -= (k + 1) - gap[cut]
        else:
            radius[rows[cut]] *= np.exp2(gap[cut] - (k + 1))
    return SkipTable(table.coef, radius, table.offsets, table.log2_radii, k)


def device_layout(table: SkipTable) -> tuple[np.ndarray, np.ndarray]:
    """(coef (N, COLUMNS), radius (N,)): the table as the kernels read it (kernels/perturb.cl).

    One map a row: the map of level j >= 1 that starts at step m is row m - 1 + 2^(j-1),
    the middle of the steps it covers (each row is the middle of one map only), so the
    maps that start at one step lie 1, 2, 4, ... rows apart and the short ones share a
    cache line; level 1's radius at step m is row m, beside Z(m). Rows without a map have
    radius 0 (-inf for log2 radii). Radii bound max(|d.re|, |d.im|), the kernels' cheap
    measure of a delta: the table's radius (of |d|) over sqrt(2), rounded down."""
    rows = max(2 * int(table.offsets[min(2, table.levels)] - table.offsets[min(1, table.levels)]), 1)
    coef = np.zeros((rows, table.coef.shape[1]))
    radius = np.full(rows, -np.inf if table.log2_radii else 0.0)
    for j in range(1, table.levels):
        lo, hi = int(table.offsets[j]), int(table.offsets[j + 1])
        at = np.arange(hi - lo) * 2**j + 2 ** (j - 1)
        coef[at] = table.coef[lo:hi]
        if table.log2_radii:
            radius[at] = table.radius[lo:hi] - 0.5
        else:  # R / sqrt(2), one rounding, then one ulp down: never above the bound
            radius[at] = np.nextafter(table.radius[lo:hi] / math.sqrt(2.0), 0.0)
    return coef, radius


def apply(table: SkipTable, index: int, d: complex, dc: complex) -> complex:
    """Map ``index`` applied to (d, dc) in frame units (double deltas; for tests)."""
    c = table.coef[index]
    return sum(complex(c[2 * k], c[2 * k + 1]) * d**a * dc**b for k, (a, b) in enumerate(hd.TERMS))
