"""Bilinear approximation (BLA) tables: skipping perturbation iterations in blocks.

For a pixel at reference step m, perturbation does d <- 2 Z(m) d + d^2 + dc. While
|d| is tiny the d^2 term is below rounding, and the step is linear: d <- A d + B dc
with A = 2 Z(m), B = 1, valid while |d| < R = eps |2 Z(m)| (then |d|^2 < eps |A d|).
Two consecutive maps (A1, B1, R1) for l1 steps and (A2, B2, R2) for l2 steps merge
into one for l1 + l2 steps:

    A = A2 A1,   B = A2 B1 + B2,   R = min(R1, max(0, (R2 - |B1| c) / |A1|))

where c bounds |dc| over the frame (its largest pixel offset): after the first map
|d| <= |A1| |d| + |B1| c, which must be below R2. Level j of the table holds maps of
2^j steps starting at steps m = 1 + k 2^j (step 0 has Z = 0: it cannot be skipped,
and it sets d = dc exactly). The kernel, at step m, takes the longest map that starts
there and is valid for its |d|, then checks escape where it lands.

eps = 2^-53: a skipped step drops a term below double rounding, so a skip changes
nothing that plain double deltas would have kept.
"""

from __future__ import annotations

import numpy as np

EPS = 2.0**-53


def bla_table(orbit: np.ndarray, dc_max: float,
              eps: float = EPS) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ab, r, offsets) for an (L, 2) orbit: ``ab`` (N, 4) float64 rows (A.re, A.im, B.re,
    B.im), ``r`` (N,) validity radii, ``offsets`` (levels + 1,) uint32 where level j's
    maps are rows offsets[j] .. offsets[j+1] - 1; map k of level j covers steps
    1 + k 2^j .. (k + 1) 2^j, i.e. it takes d at step m = 1 + k 2^j to step m + 2^j."""
    z = orbit[:, 0] + 1j * orbit[:, 1]
    steps = len(z) - 2  # maps m -> m + 1 for m = 1 .. L - 2 (Z(m + 1) must exist)
    if steps < 1:
        return np.zeros((0, 4)), np.zeros(0), np.zeros(1, dtype=np.uint32)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        a = 2.0 * z[1:1 + steps]
        b = np.ones(steps, dtype=np.complex128)
        r = eps * np.abs(a)
        levels: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = [(a, b, r)]
        while len(levels[-1][0]) >= 2:
            a1, b1, r1 = (x[0:-1:2] if len(x) % 2 else x[0::2] for x in levels[-1])
            a2, b2, r2 = (x[1::2] for x in levels[-1])
            n = min(len(a1), len(a2))
            a1, b1, r1, a2, b2, r2 = a1[:n], b1[:n], r1[:n], a2[:n], b2[:n], r2[:n]
            am = a2 * a1
            bm = a2 * b1 + b2
            rm = np.minimum(r1, np.maximum(0.0, (r2 - np.abs(b1) * dc_max) / np.abs(a1)))
            rm = np.where(np.isfinite(rm) & np.isfinite(am) & np.isfinite(bm), rm, 0.0)
            levels.append((am, bm, rm))
    ab = np.concatenate([np.stack([a.real, a.imag, b.real, b.imag], axis=1) for a, b, _ in levels])
    radii = np.concatenate([r for _, _, r in levels])
    offsets = np.cumsum([0] + [len(a) for a, _, _ in levels]).astype(np.uint32)
    bad = ~np.isfinite(ab).all(axis=1)
    ab[bad] = 0.0
    radii[bad] = 0.0
    return np.ascontiguousarray(ab), np.ascontiguousarray(radii), offsets
