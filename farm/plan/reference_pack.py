"""References packed for the store and for MPI's broadcast (farm/plan/reference_types.py's
:class:`References` as plain lists and two arrays), and back."""

from __future__ import annotations

import numpy as np

from farm.plan.reference_types import Reference, References

# farm.numerics (mpmath, gmpy2) is imported where used: see farm/plan/reference_types.py


def pack(refs: References) -> tuple[dict, np.ndarray]:
    """(metadata, orbits): everything but the orbits' mantissas as plain lists (for the
    store's small datasets and MPI's pickled broadcast; "exps" as an int32 array, the
    orbits' exponents), and every orbit back to back as one (sum L, 2) float64 array
    of mantissas (farm/numerics/orbit.py; one buffer to write or broadcast)."""
    from farm.numerics.orbit import Orbit

    lengths = [len(r.points) for r in refs.refs]
    both = Orbit.concat([r.points for r in refs.refs])
    meta = {
        "re": [r.point.re for r in refs.refs], "im": [r.point.im for r in refs.refs],
        "bits": [r.point.bits for r in refs.refs], "period": [r.period for r in refs.refs],
        "kind": [r.kind for r in refs.refs], "log2_scale": [r.log2_scale for r in refs.refs],
        "angle": [r.angle for r in refs.refs], "wrap": [r.wrap for r in refs.refs],
        "starts": [0, *np.cumsum(lengths).tolist()], "frame_ref": list(refs.frame_ref),
        "exps": np.ascontiguousarray(both.exps, dtype=np.int32),
    }
    return meta, np.ascontiguousarray(both.mant, dtype=np.float64)


def unpack(meta: dict, orbits: np.ndarray) -> References:
    """Inverse of :func:`pack` (without "exps" and "wrap", as a store written before
    they were kept: orbits of doubles that wrap to 0)."""
    from farm.numerics import period as per
    from farm.numerics.orbit import Orbit

    starts = [int(s) for s in meta["starts"]]
    exps = meta.get("exps")
    if exps is None:
        exps = np.zeros(len(orbits), np.int32)
    wraps = meta.get("wrap", [0] * (len(starts) - 1))
    refs = tuple(
        Reference(per.Point(str(meta["re"][k]), str(meta["im"][k]), int(meta["bits"][k])),
                  int(meta["period"][k]),
                  Orbit(orbits[starts[k]:starts[k + 1]], np.asarray(exps[starts[k]:starts[k + 1]], np.int32)),
                  str(meta["kind"][k]), float(meta["log2_scale"][k]), float(meta["angle"][k]),
                  int(wraps[k]))
        for k in range(len(starts) - 1))
    return References(refs, tuple(int(k) for k in meta["frame_ref"]))
