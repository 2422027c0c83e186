#!/usr/bin/env python3
"""What the GPU colourer's start costs, step by step, in this fresh process.

    python3 benchmarks/colourer_start.py        # run it several times: the first builds

Times, in the order `farm encode` took them before farm/encode/early.py: importing
numpy and pyopencl, the drivers' platforms (``cl.get_platforms``: the ICD loader starts
every vendor's driver), each platform's devices, the farm's device list and choice, a
context on the first GPU, the colouring and unshuffling programs from the build cache,
and a queue, kernel and buffer. Needs an OpenCL GPU."""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

t0 = time.perf_counter()
import numpy  # noqa: E402, F401
import pyopencl as cl  # noqa: E402

t1 = time.perf_counter()
from farm.compute import programs  # noqa: E402
from farm.compute.device import candidates, list_devices  # noqa: E402


def main() -> None:
    t2 = time.perf_counter()
    platforms = cl.get_platforms()
    t3 = time.perf_counter()
    per = []
    for p in platforms:
        a = time.perf_counter()
        p.get_devices()
        per.append(f"{p.name.strip()} {time.perf_counter() - a:.3f}")
    list_devices()
    _, device = candidates("gpu")[0]
    t4 = time.perf_counter()
    ctx = cl.Context([device])
    t5 = time.perf_counter()
    colour = programs.build(ctx, ("color.cl",))
    t6 = time.perf_counter()
    programs.build(ctx, ("shuffle.cl",))
    t7 = time.perf_counter()
    cl.CommandQueue(ctx), cl.Kernel(colour, "colour"), cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 1 << 24)
    t8 = time.perf_counter()
    print(f"imports (numpy, pyopencl) {t1 - t0:.3f} s, platforms {t3 - t2:.3f}, devices ({', '.join(per)}) "
          f"and the choice {t4 - t3:.3f}, context {t5 - t4:.3f}, colour program {t6 - t5:.3f}, "
          f"unshuffle program {t7 - t6:.3f}, queue, kernel and buffer {t8 - t7:.3f}")


if __name__ == "__main__":
    main()
