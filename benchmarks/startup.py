#!/usr/bin/env python3
"""Start-up: a render's steps before its first kernel; what `--restart` costs; the pre-pass on a device.

Reproduces BENCHMARKS.md's start-up rows (to the first kernel, with a fixed limit and with
`max = "auto"`; the floor of any pyopencl program), the `--restart` row (``--restart``)
and the escape pre-pass in numpy against a device (``--prepass``).

    python3 benchmarks/startup.py [JOB.toml]      # default: the light 1080p job
    python3 benchmarks/startup.py --floor         # the least any pyopencl program takes
    python3 benchmarks/startup.py --render JOB    # the real `farm render`, time-stamped
    python3 benchmarks/startup.py --restart JOB --rounds 3 [--baseline DIR]
    python3 benchmarks/startup.py --prepass JOB.toml [JOB.toml ...] [--device auto]

Prints the seconds of each step as `farm render` takes them: importing the farm
(and the libraries it loads), finding OpenCL platforms, choosing the device, the
plan, the reference orbit, creating the store, the renderer (context, buffers), the
first kernel builds (from pyopencl's and the driver's caches after the first run),
and the first frame's preparation; with ``max = "auto"`` the escape pre-pass after the
references (farm/plan/prepass.py). Run it twice: the second run shows warm caches.

``--render``: `farm render JOB --restart --no-video` itself (``--video``: with its video, as
by default), in fresh processes (three), stopped once its first kernel is enqueued: when
each step began and ended, in seconds from the process's start (the functions that take
them are wrapped wherever the farm's modules hold them; steps on other threads overlap).

``--floor``: what a Python program needs before any kernel of its own, timed from the
interpreter's start in fresh processes (five, the median of each step): the
interpreter, numpy, pyopencl, the OpenCL platforms, a context and queue on the first
GPU (else the first device), a one-line kernel built from pyopencl's cache, launched
and finished. A side thread counts while the platforms and the context are made: if
pyopencl held the interpreter's lock there, the count stops, and nothing Python does
(the reference orbit, the store) can overlap them.

``--restart``: each round renders JOB completely (`farm render JOB --restart
--no-video`), then runs the same command again with ``pathlib.Path.unlink`` wrapped to
print every removal over 10 ms (the file, its seconds, the thread that waited for it),
and prints that command's wall time and its store's timeline. With ``--baseline DIR`` (a
checkout's ``farm`` and ``kernels`` folders, e.g. from ``git archive REV farm kernels``)
each round runs that version and this one, in alternating order.

``--prepass``: for each job, its plan and references as `farm render` makes them, then
the grids the escape pre-pass iterates (farm/plan/prepass.py), iterated by numpy and on
``--device`` (farm/compute/prepass.py, after one small warm-up call that builds the
program): both times, whether every point's count is identical, and the first limits.
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
def farm_modules():
    return [m for k, m in list(sys.modules.items()) if k.startswith("farm") and m is not None]
def wrap(inner, label):
    def wrapped(*a, **k):
        name = label(*a) if callable(label) else label
        mark(name + " begins")
        try:
            return inner(*a, **k)
        finally:
            mark(name + " ends")
    return wrapped
def around(name, label, where=""):
    # the farm's function `name` (or Class.method) wrapped wherever a loaded farm module
    # holds it (a from-import copies it), its module's name containing `where`: the
    # modules move, the functions keep their names; one not found is left out
    owner, _, attr = name.rpartition(".")
    if owner:
        for m in farm_modules():
            cls = vars(m).get(owner)
            if isinstance(cls, type) and where in cls.__module__ and attr in vars(cls) \
                    and not getattr(vars(cls)[attr], "_wrapped", False):
                new = wrap(vars(cls)[attr], label)
                new._wrapped = True
                setattr(cls, attr, new)
        return
    found = {}
    for m in farm_modules():
        f = vars(m).get(attr)
        module = getattr(f, "__module__", None) or ""
        if callable(f) and getattr(f, "__qualname__", "") == attr and module.startswith("farm") \
                and where in module:
            found[id(f)] = (f, wrap(f, label))
    for m in farm_modules():
        for key, value in list(vars(m).items()):
            if id(value) in found and found[id(value)][0] is value:
                setattr(m, key, found[id(value)][1])
def replace(attr, make):
    # every farm module's `attr` (a module-level function) replaced by make(original)
    originals = {id(f): f for m in farm_modules() for f in [vars(m).get(attr)]
                 if callable(f) and (getattr(f, "__module__", None) or "").startswith("farm")}
    if not originals:
        raise SystemExit(f"startup: no {attr} in the farm's modules (moved or renamed?)")
    new = {k: make(f) for k, f in originals.items()}
    for m in farm_modules():
        for key, value in list(vars(m).items()):
            if id(value) in new and originals[id(value)] is value:
                setattr(m, key, new[id(value)])
def hooked(begins):
    def opencl_begins():
        # where `farm render` starts OpenCL, before it imports the render's modules and
        # reads the job: those imports here, then the steps wrapped
        begins()
        mark("OpenCL's discovery started (pyopencl imported)")
        import importlib
        for name in ("farm.run", "farm.compute.prep", "farm.compute.programs", "farm.compute.render",
                     "farm.schedule.master", "farm.store.layout", "farm.store.writer",
                     "farm.plan.auto_limits", "farm.plan.references"):
            try:
                importlib.import_module(name)
            except ImportError:
                pass
        mark("imports (farm.run)")
        around("bind_local", "OpenCL platforms, device")
        around("spawn_helpers", "frame preparation's helpers spawned")
        around("compute_reference", "reference orbit")
        around("with_period_limits", "iteration limits")
        around("begin", "store's body written", "layout")
        around("NewStore.finish", "store's references written, in place")
        around("create", "store created", "layout")  # (an older farm's one step)
        around("_run_in_process", "workers", "run")
        around("TileRenderer.__init__", "renderer (context, buffers)")
        around("TileRenderer.ensure_slots", "the worker's other slots")
        around("FramePrep.__init__", "frame preparation")
        around("StoreWriter.__init__", "store opened for writing")
        around("run_master", "master loop")
        around("build", lambda ctx, names, *rest: "build " + "+".join(names), "programs")
        from farm.compute import render
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
    return opencl_begins
try:
    replace("opencl_begins", hooked)
except SystemExit:
    replace("_opencl_begins", hooked)  # (an older farm's name)
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


# --------------------------------------------------------------------------- --restart

RESTART = r"""
import pathlib, sys, threading, time
T0 = time.perf_counter()
real = pathlib.Path.unlink
def timed(self, missing_ok=False):
    t = time.perf_counter()
    try:
        return real(self, missing_ok=missing_ok)
    finally:
        if time.perf_counter() - t > 0.01:
            print(f"  unlink {self.name}: {time.perf_counter() - t:.3f} s, from {t - T0:.3f} s, "
                  f"on {threading.current_thread().name}", file=sys.stderr)
pathlib.Path.unlink = timed
from farm.cli import main
sys.exit(main(sys.argv[1:]))
"""


def restart(job: Path, rounds: int, baseline: Path | None) -> None:
    """The --restart rounds (see the module's docstring)."""
    import os
    import subprocess

    here = Path(__file__).resolve().parents[1]
    rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    versions = {"this": os.pathsep.join([str(here), *rest])}
    if baseline:
        versions = {"baseline": os.pathsep.join([str(baseline.resolve()), *rest]), **versions}
    command = ["render", str(job), "--restart", "--no-video"]
    for r in range(rounds):
        names = list(versions) if r % 2 == 0 else list(reversed(versions))
        for name in names:
            subprocess.run([sys.executable, "-c", RESTART, *command, "--quiet"], check=True,
                           capture_output=True, env=dict(os.environ, PYTHONPATH=versions["this"]))
            t0 = time.perf_counter()
            done = subprocess.run([sys.executable, "-c", RESTART, *command], capture_output=True, text=True,
                                  env=dict(os.environ, PYTHONPATH=versions[name]))
            wall = time.perf_counter() - t0
            lines = [line for line in done.stderr.splitlines() if "unlink" in line or "timeline" in line]
            print(f"round {r + 1}, {name}: {wall:.2f} s (exit status {done.returncode})", *lines, sep="\n",
                  flush=True)


# --------------------------------------------------------------------------- --prepass

def prepass_grids(path: Path) -> list:
    """The (grids, r2) the job's pre-pass iterates, as `farm render` makes them."""
    from farm import spec as specmod
    from farm.plan import make_plan, prepass
    try:
        from farm.plan.auto_limits import with_period_limits
    except ImportError:  # (before farm/plan/auto_limits.py)
        from farm.plan.references import with_period_limits

    seen: list = []
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


def prepass_device(jobs: list[Path], selector: str) -> None:
    """The --prepass comparison (see the module's docstring)."""
    import numpy as np
    import pyopencl as cl

    from farm.compute import prepass as device_prepass
    from farm.compute.device import candidates
    from farm.plan import prepass

    info, device = candidates(selector)[0]
    queue = cl.CommandQueue(cl.Context([device]))
    print(f"device: {info.describe()}")
    for path in jobs:
        found = prepass_grids(path)
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
                  f"identical counts: {same}; limits {limits[:6]}...", flush=True)


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[:2]))
    ap.add_argument("jobs", nargs="*", type=Path, metavar="JOB",
                    help="default: benchmarks/jobs/light_1080p.toml (--prepass: several)")
    ap.add_argument("--floor", action="store_true", help="what any pyopencl program takes (see above)")
    ap.add_argument("--video", action="store_true",
                    help="with --render: with the video's process, as `farm render` has by default")
    ap.add_argument("--render", action="store_true",
                    help="the real `farm render JOB` to its first kernel, its steps time-stamped")
    ap.add_argument("--restart", action="store_true", help="what `farm render JOB --restart` over a "
                    "finished store costs")
    ap.add_argument("--rounds", type=int, default=3, help="with --restart (default 3)")
    ap.add_argument("--baseline", type=Path,
                    help="with --restart: another version's checkout (farm/, kernels/)")
    ap.add_argument("--prepass", action="store_true",
                    help="the jobs' escape pre-pass in numpy against --device")
    ap.add_argument("--device", default="auto",
                    help="with --prepass: auto | gpu | cpu (default: %(default)s)")
    args = ap.parse_args()
    jobs = args.jobs or [Path(__file__).resolve().parents[1] / "benchmarks/jobs/light_1080p.toml"]
    if args.floor:
        floor()
        return
    if args.prepass:
        prepass_device(jobs, args.device)
        return
    if args.restart:
        restart(jobs[0], args.rounds, args.baseline)
        return
    if args.render:
        render_steps(jobs[0], video=args.video)
        return
    job = jobs[0]
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
    from farm.plan.auto_limits import with_period_limits
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
