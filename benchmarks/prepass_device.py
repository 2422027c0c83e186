#!/usr/bin/env python3
"""The escape pre-pass (``max = "auto"``) in numpy against its steps on a device.

    python3 benchmarks/prepass_device.py [--device auto] JOB.toml [JOB.toml ...]

For each job: its plan and references as `farm render` makes them, then the grids the
pre-pass iterates (farm/plan/prepass.py), iterated by numpy and on the device
(farm/compute/prepass.py, after one small warm-up call that builds the program);
prints both times, whether every point's count is identical, and the first limits.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pyopencl as cl

from farm import spec as specmod
from farm.compute import prepass as device_prepass
from farm.compute.device import candidates
from farm.plan import make_plan, prepass
from farm.plan.references import with_period_limits


def grids_of(path: str) -> list[tuple[list[prepass.Grid], float]]:
    """The (grids, r2) the job's pre-pass iterates."""
    seen: list[tuple[list[prepass.Grid], float]] = []
    real = prepass.iterate

    def keep(grids, r2):
        seen.append((list(grids), r2))
        return real(grids, r2)

    prepass.iterate = keep
    try:
        plan = make_plan(specmod.load(path))
        with_period_limits(plan, plan.references())
    finally:
        prepass.iterate = real
    return seen


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("jobs", nargs="+")
    ap.add_argument("--device", default="auto", help="auto | gpu | cpu (default: %(default)s)")
    args = ap.parse_args()
    info, device = candidates(args.device)[0]
    queue = cl.CommandQueue(cl.Context([device]))
    print(f"device: {info.ref} {info.name}")
    for path in args.jobs:
        found = grids_of(path)
        if not found:
            print(f"{path}: no pre-pass (a fixed max, or every frame set by other rules)")
        for grids, r2 in found:
            t0 = time.perf_counter()
            want = prepass.iterate(grids, r2)
            t1 = time.perf_counter()
            device_prepass.iterate(queue, grids[:1], r2)  # the program's build
            t2 = time.perf_counter()
            got = device_prepass.iterate(queue, grids, r2)
            t3 = time.perf_counter()
            same = all(np.array_equal(a, b) and ta == tb for (a, ta), (b, tb) in zip(got, want, strict=True))
            limits = [max(tail, prepass.quantile_count(c)) for c, tail in want]
            print(f"{path}: {len(grids)} grids; numpy {t1 - t0:.3f} s, device {t3 - t2:.3f} s; "
                  f"identical counts: {same}; limits {limits[:6]}...")


if __name__ == "__main__":
    main()
