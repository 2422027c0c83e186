#!/usr/bin/env python3
"""What a render does before its first kernel, step by step, in one process.

    python3 benchmarks/startup.py [JOB.toml]      # default: the light 1080p job
    python3 benchmarks/startup.py --floor         # the least any pyopencl program takes
    python3 benchmarks/startup.py --render JOB    # the real `farm render`, time-stamped

Prints the seconds of each step as `farm render` takes them: importing the farm
(and the libraries it loads), finding OpenCL platforms, choosing the device, the
plan, the reference orbit, creating the store, the renderer (context, buffers), the
first kernel builds (from pyopencl's and the driver's caches after the first run),
and the first frame's preparation; with ``max = "auto"`` the escape pre-pass after the
references (farm/plan/prepass.py). Run it twice: the second run shows warm caches.

``--render``: `farm render JOB --restart --no-video` itself (``--video``: with its video, as
by default), in fresh processes (three),
stopped once its first kernel is enqueued: when each step began and ended, in seconds
from the process's start (the functions that take them are wrapped; steps on other
threads overlap).

``--floor``: what a Python program needs before any kernel of its own, timed from the
interpreter's start in fresh processes (five, the median of each step): the
interpreter, numpy, pyopencl, the OpenCL platforms, a context and queue on the first
GPU (else the first device), a one-line kernel built from pyopencl's cache, launched
and finished. A side thread counts while the platforms and the context are made: if
pyopencl held the interpreter's lock there, the count stops, and nothing Python does
(the reference orbit, the store) can overlap them.
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


FLOOR = r"""
import sys, threading, time
t = [time.time()]
import numpy
t.append(time.time())
import pyopencl as cl
t.append(time.time())
count, stop = [0], [False]
def spin():
    while not stop[0]:
        count[0] += 1
side = threading.Thread(target=spin)
side.start(); time.sleep(0.05); c0, s0 = count[0], time.time(); time.sleep(0.05)
rate = (count[0] - c0) / (time.time() - s0)  # counts a second while the main thread sleeps
t.append(time.time()); c1 = count[0]
devices = [d for p in cl.get_platforms() for d in p.get_devices()]
dev = next((d for d in devices if d.type & cl.device_type.GPU), devices[0])
t.append(time.time())
ctx = cl.Context([dev]); queue = cl.CommandQueue(ctx)
t.append(time.time()); c2 = count[0]
stop[0] = True; side.join()
prg = cl.Program(ctx, "kernel void k(global int *a) { a[get_global_id(0)] = 1; }").build()
buf = cl.Buffer(ctx, cl.mem_flags.WRITE_ONLY, 4096)
t.append(time.time())
prg.k(queue, (1024,), None, buf); queue.finish()
t.append(time.time())
share = (c2 - c1) / max(1.0, rate * (t[5] - t[3]))
print(" ".join(f"{x!r}" for x in t), share, dev.name.replace(" ", "_"))
"""
# --render: the real `farm render` in a fresh process, its steps time-stamped by
# wrapping the functions that take them, stopped once its first kernel is enqueued
RENDER = r"""
import os, sys, time
marks = [("interpreter running", time.time())]
def mark(name):
    marks.append((name, time.time()))
import farm.cli
mark("import farm.cli")
def around(owner, name, label):
    inner = getattr(owner, name, None)
    if inner is None:  # (an older farm, compared with this one: a step it does not have)
        return
    def wrapped(*a, **k):
        mark(label + " begins")
        try:
            return inner(*a, **k)
        finally:
            mark(label + " ends")
    setattr(owner, name, wrapped)
begins = farm.cli._opencl_begins
def opencl_begins():
    # where `farm render` starts OpenCL, before it imports the render's modules and
    # reads the job: those imports here, then the steps wrapped
    begins()
    mark("OpenCL's discovery started (pyopencl imported)")
    import farm.run
    from farm.compute import prep, programs, render
    from farm.schedule import master
    from farm.store import layout, writer
    mark("imports (farm.run)")
    around(farm.run, "bind_local", "OpenCL platforms, device")
    around(farm.run, "spawn_helpers", "frame preparation's helpers spawned")
    around(farm.run, "compute_reference", "reference orbit")
    around(farm.run, "with_period_limits", "iteration limits")
    around(layout, "begin", "store's body written")
    around(getattr(layout, "NewStore", None), "finish", "store's references written, in place")
    around(layout, "create", "store created")  # (an older farm's one step)
    around(farm.run, "_run_in_process", "workers")
    around(render.TileRenderer, "__init__", "renderer (context, buffers)")
    around(render.TileRenderer, "ensure_slots", "the worker's other slots")
    around(prep.FramePrep, "__init__", "frame preparation")
    around(writer.StoreWriter, "__init__", "store opened for writing")
    around(farm.run, "run_master", "master loop")
    build = programs.build
    def timed_build(ctx, names, options=()):
        mark("build " + "+".join(names) + " begins")
        try:
            return build(ctx, names, options)
        finally:
            mark("build " + "+".join(names) + " ends")
    programs.build = timed_build
    launch = render.TileRenderer.launch
    def first(self, *a, **k):
        launch(self, *a, **k)
        first_kernel = ("first kernel enqueued", time.time())
        marks.append(first_kernel)
        # (the worker's slots are still being made on another thread: their marks after
        # this one are left out, so that this one is the last line)
        for name, t in marks[:marks.index(first_kernel) + 1]:
            print(repr(t), name.replace(" ", "_"))
        sys.stdout.flush()
        os._exit(0)
    render.TileRenderer.launch = first
farm.cli._opencl_begins = opencl_begins
video = ["--video", sys.argv[3]] if len(sys.argv) > 3 else ["--no-video"]
farm.cli.main(["render", sys.argv[1], "--store", sys.argv[2], "--restart", *video, "--quiet"])
"""


def render_steps(job: Path, runs: int = 3, video: bool = False) -> None:
    """The --render table (see the module's docstring); ``video``: with the video's
    process beside the render, as `farm render` has by default."""
    import subprocess

    for run in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            start = time.time()
            extra = [str(Path(tmp) / "v.mp4")] if video else []
            out = subprocess.run([sys.executable, "-c", RENDER, str(job), str(Path(tmp) / "s.h5"), *extra],
                                 capture_output=True, text=True, check=False)
        lines = [line.split(" ", 1) for line in out.stdout.splitlines() if line.strip()]
        if not lines or lines[-1][1] != "first_kernel_enqueued":
            raise SystemExit(f"startup: the render did not reach its first kernel (exit status "
                             f"{out.returncode})\n{out.stderr[-2000:]}")
        print(f"run {run + 1}: seconds from the process's start")
        for t, name in lines:
            print(f"  {float(t) - start:7.3f}  {name.replace('_', ' ')}")


FLOOR_STEPS = ["interpreter start", "import numpy", "import pyopencl", "OpenCL platforms and devices",
               "context and queue", "build a one-line kernel (cached), a buffer", "launch, finish"]


def floor(runs: int = 5) -> None:
    """The --floor table (see the module's docstring)."""
    import statistics
    import subprocess

    rows, shares, name = [], [], ""
    for _ in range(runs):
        start = time.time()
        out = subprocess.run([sys.executable, "-c", FLOOR], capture_output=True, text=True, check=True)
        *stamps, share, name = out.stdout.split()
        t = [start] + [float(x) for x in stamps]
        # step 3 is the side thread's own sampling (0.1 s), not start-up: left out
        rows.append([b - a for k, (a, b) in enumerate(zip(t[:-1], t[1:], strict=True)) if k != 3])
        shares.append(float(share))
    width = max(len(s) for s in FLOOR_STEPS)
    for k, label in enumerate(FLOOR_STEPS):
        print(f"{label:<{width}}  {statistics.median(r[k] for r in rows):7.3f} s")
    print(f"{'total (median of the runs)':<{width}}  {statistics.median(sum(r) for r in rows):7.3f} s"
          f"  on {name}")
    print(f"a Python thread ran {statistics.median(shares):.0%} of its rate while the platforms "
          "and the context were made")


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("job", nargs="?", type=Path,
                    default=Path(__file__).resolve().parents[1] / "benchmarks/jobs/light_1080p.toml")
    ap.add_argument("--floor", action="store_true", help="what any pyopencl program takes (see above)")
    ap.add_argument("--video", action="store_true",
                    help="with --render: with the video's process, as `farm render` has by default")
    ap.add_argument("--render", action="store_true",
                    help="the real `farm render JOB` to its first kernel, its steps time-stamped")
    args = ap.parse_args()
    if args.floor:
        floor()
        return
    if args.render:
        render_steps(args.job, video=args.video)
        return
    job = args.job
    t = step("arguments", T0)
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
