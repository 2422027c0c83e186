#!/usr/bin/env python3
"""What a render does before its first kernel, step by step, in one process.

    python3 benchmarks/startup.py [JOB.toml]      # default: the light 1080p job

Prints the seconds of each step as `farm render` takes them: importing the farm
(and the libraries it loads), finding OpenCL platforms, choosing the device, the
plan, the reference orbit, creating the store, the renderer (context, buffers), the
first kernel builds (from pyopencl's and the driver's caches after the first run),
and the first frame's preparation; with ``max = "auto"`` the escape pre-pass after the
references (farm/plan/prepass.py). Run it twice: the second run shows warm caches.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

T0 = time.perf_counter()
ROWS: list[tuple[str, float]] = []


def step(name: str, t: float) -> float:
    now = time.perf_counter()
    ROWS.append((name, now - t))
    return now


def main() -> None:
    job = Path(sys.argv[1]) if len(sys.argv) > 1 else \
        Path(__file__).resolve().parents[1] / "benchmarks/jobs/light_1080p.toml"
    t = T0
    import numpy  # noqa: F401
    t = step("import numpy", t)
    import pyopencl  # noqa: F401
    t = step("import pyopencl", t)
    import h5py  # noqa: F401
    t = step("import h5py", t)
    import mpmath  # noqa: F401
    t = step("import mpmath (gmpy2)", t)
    import farm.run  # noqa: F401
    t = step("import farm.run (the rest)", t)
    from farm.compute import device
    device.list_devices()
    t = step("OpenCL platforms and devices", t)
    info, dev = device.bind_device("auto")
    t = step(f"choose device ({info.name})", t)
    from farm import spec
    from farm.plan import make_plan
    plan = make_plan(spec.load(job))
    t = step(f"spec and plan ({len(plan.frames)} frames)", t)
    refs = plan.references()
    points = 0 if refs is None else sum(len(r.orbit) for r in refs.refs)
    t = step(f"references ({points} orbit points)", t)
    from farm.plan.references import with_period_limits
    plan = with_period_limits(plan, refs)
    t = step(f"max = \"auto\" (escape pre-pass; up to {max(f.max_iter for f in plan.frames)})"
             if plan.spec.iterations.max == "auto" else "fixed iteration limit", t)
    from farm.store import layout
    store = Path(tempfile.mkdtemp()) / "startup.h5"
    layout.create(store, plan, refs)
    t = step(f"create the store ({layout.store_bytes(plan) / 1e9:.2f} GB, sparse)", t)
    from farm.compute.render import TileRenderer
    renderer = TileRenderer(dev, info, plan, references=refs)
    t = step("renderer: context, queue, buffers", t)
    formats = {f.precision for f in plan.frames}
    for fmt in sorted(formats):
        renderer._kernel(next(f for f in plan.frames if f.precision == fmt))
    t = step(f"kernel builds ({', '.join(sorted(formats))})", t)
    renderer.prepare(plan.frames[-1]).result()
    t = step("prepare the last frame", t)
    renderer.render(plan.frames[-1], plan.grid.tile(0))
    t = step("render one tile of the last frame", t)
    renderer.close()
    store.unlink()
    width = max(len(n) for n, _ in ROWS)
    for name, seconds in ROWS:
        print(f"{name:<{width}}  {seconds:7.3f} s")
    print(f"{'total':<{width}}  {sum(s for _, s in ROWS):7.3f} s")


if __name__ == "__main__":
    main()
