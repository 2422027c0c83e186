"""Depth and reference orbits: frames at 1e-10000 and 1e-100000, a zoom to 1e-10000, an orbit step by engine.

Reproduces BENCHMARKS.md's rows "1080p frames at depth" and "600-frame 1080p zoom to
1e-10000", and (``--orbits``) the table of "Depth and reference orbits".

Near Misiurewicz points that `farm find` produces, the whole `farm render` command timed
and split into reference orbit, start-up and render (the store's timeline:
farm/runtime/timeline.py). Frames (each a one-frame job, auto iterations, the device
`farm render` picks):

  10k-deep    1e-10000 at a Misiurewicz point followed down to 1e-10000 (its
              preperiod, and so its reference orbit, about the iterations the depth
              needs: tens of thousands of steps at 33k bits)
  10k         1e-10000 at a Misiurewicz point followed down to 1e-1000 only (a
              reference ten times shorter; below 1e-1000 the view is self-similar)
  100k        1e-100000 at a Misiurewicz point followed down to 1e-1000 (332k-bit
              coordinates; the same short reference)
  zoom-10k    a 600-frame zoom from width 4 to 1e-10000 at the 10k-deep point, with
              its video (issue 23: "renders end to end on one GPU")

The `farm find` runs are timed apart (they are the user's preparation, not the
render; on two cores: 11 s, 200 s and 180 s); jobs already in --out are
rendered as they are, so they can be made beforehand on another machine and the
renders timed alone. The stores are removed before each render (a fresh render,
reference included). Usage (from the repository root; --size 320x180 for a quick CPU
run):

    python benchmarks/depth.py [--size 1920x1080] [--only 10k,100k] [--out DIR] [--find-only]
    python benchmarks/depth.py --find-only --size 1920x1080 --out out/depthjobs   # CPU machine
    python3 benchmarks/depth.py --only 10k,10k,10k-deep,100k,zoom-10k --out out/depthjobs  # GPU

``--orbits [ROUNDS]``: one step of a reference orbit, z <- z^2 + c, at 10k, 30k, 100k and
300k digits (33k, 100k, 333k and 1M bits), by engine, the best of ROUNDS runs (default 6;
the load average is printed):

  gmpy2 x^2-y^2      gmpy2, one thread, x' = x^2 - y^2 + cr, y' = 2xy + ci (three
                     products: the farm's form before issue 23)
  gmpy2 (x+y)(x-y)   gmpy2, one thread, two products (GmpyOrbiter)
  MPFR 2 threads     MPFR through ctypes, (x+y)(x-y) here and x y on a helper thread
                     at once (ThreadedOrbiter: ctypes releases the GIL, gmpy2 does not)
  2 processes        gmpy2, x y in a second process, numbers through a pipe
  flint arb 1/2 thr  python-flint's arb (if installed), ctx.threads 1 and 2
  OpenCL NTT         farm/numerics/gpu_orbit.py on the first GPU, else the first OpenCL
                     device (PoCL's CPU device: slow), named above the table; steps in
                     batches as orbiters.orbit() runs them, points read back and
                     checked, start-up (kernel build, first batch) not counted
  Newton MPFR        z and dz <- 2 z dz + 1 together, as farm find's Newton iterations
                     step them on the host (farm/numerics/newton.py: MPFR on two threads
                     where orbits use them, else gmpy2)
  Newton OpenCL      the same on the device, farm/numerics/gpu_newton.py's run() (values
                     read back at the last step only, as Newton's method reads them;
                     start-up not counted)

``--engines A,B``: only the engines whose names contain one of these.

The point is inside the main cardioid with random digits to full length (an orbit
that neither escapes nor has short numbers).

    python3 benchmarks/depth.py --orbits 8
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from farm import spec as specmod  # noqa: E402

START = ("-1.7687", "0.0017")  # near the antenna's tip (fast orbits)
# name: (depth, structure followed down to, frames; a zoom of more than one frame is
# rendered with its video)
CASES = {
    "10k-deep": ("1e-10000", "1e-10000", 1),
    "10k": ("1e-10000", "1e-1000", 1),
    "100k": ("1e-100000", "1e-1000", 1),
    "zoom-10k": ("1e-10000", "1e-10000", 600),
}


def farm(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "farm", *args], capture_output=True, text=True)


def find_job(name: str, depth: str, structure: str, frames: int, size: str,
             out: Path) -> tuple[Path, float]:
    """The case's job in ``out`` (written by `farm find` unless it is there already:
    jobs made beforehand, elsewhere, are rendered as they are; 0 s of finding)."""
    job = out / f"{name}.toml"
    if job.exists():
        return job, 0.0
    start = time.perf_counter()
    args = ["find", *START, "--misiurewicz", "--depth", depth, "--frames", str(frames), "--size", size,
            "--out", str(job), "--quiet"]
    if structure != depth:
        args += ["--structure", structure]
    done = farm(*args)
    if done.returncode:
        sys.exit(f"farm find failed: {done.stderr}")
    text = job.read_text().replace(f"renders/{name}", str(out / name))
    job.write_text(text)
    return job, time.perf_counter() - start


def render(job: Path, video: bool) -> tuple[float, str]:
    """(seconds of the whole `farm render` command, its stderr)."""
    start = time.perf_counter()
    done = farm("render", str(job), *([] if video else ["--no-video"]))
    whole = time.perf_counter() - start
    if done.returncode:
        sys.exit(f"farm render failed: {done.stderr}")
    return whole, done.stderr


def phases(store: Path) -> dict:
    """The render's timeline from the store's runs table (farm/store/layout.py)."""
    import h5py

    with h5py.File(store, "r") as f:
        run = f["runs"][0]
    started, ended = float(run["process_started"]), float(run["render_ended"])
    reference = float(run["reference_s"])
    return {"reference_s": reference, "gpu_s": float(run["gpu_s"]),
            "render_s": ended - float(run["started"]),
            "startup_s": max(0.0, float(run["started"]) - started - reference)}



# --------------------------------------------------------------------------- --orbits

def centre(digits: int, seed: int = 5) -> tuple[str, str]:
    rnd = random.Random(seed)
    tail = "".join(rnd.choice("0123456789") for _ in range(digits))
    return "-0.1" + tail, "0.1" + tail[::-1]


def steps_of(c: tuple[str, str], bits: int) -> int:
    return max(20, int(3e8 / bits**1.2))


def old_form(c, bits, steps):
    import gmpy2
    from gmpy2 import mpfr

    with gmpy2.context(gmpy2.get_context(), precision=bits):
        cr, ci = mpfr(c[0]), mpfr(c[1])
        x = y = xx = yy = mpfr(0)
        for _ in range(12):
            y = 2 * x * y + ci
            x = xx - yy + cr
            xx, yy = x * x, y * y
        t = time.perf_counter()
        for _ in range(steps):
            y = 2 * x * y + ci
            x = xx - yy + cr
            xx, yy = x * x, y * y
            float(x), float(y)
        return (time.perf_counter() - t) / steps


def stepped(o, steps, each, after=lambda: None):
    """Seconds a step of the stepper ``o`` (12 steps first, not timed): each step
    ``o.step()`` then ``each()``, and ``after()`` once at the end; ``o`` closed."""
    try:
        for _ in range(12):
            o.step()
        t = time.perf_counter()
        for _ in range(steps):
            o.step()
            each()
        after()
        return (time.perf_counter() - t) / steps
    finally:
        o.close()


def orbiter(kind):
    def run(c, bits, steps):
        from farm.numerics import period as per

        o = kind(per.parse(c, bits), bits)
        return stepped(o, steps, o.point)
    return run


def _helper(conn, bits):
    import gmpy2

    gmpy2.get_context().precision = bits
    while True:
        msg = conn.recv_bytes()
        if not msg:
            return
        x, y = (gmpy2.from_binary(part) for part in msg.split(b"\0SEP\0"))
        conn.send_bytes(gmpy2.to_binary(x * y))


def processes(c, bits, steps):
    import multiprocessing as mp

    import gmpy2
    from gmpy2 import mpfr

    a, b = mp.Pipe()
    p = mp.get_context("fork").Process(target=_helper, args=(b, bits), daemon=True)
    p.start()
    with gmpy2.context(gmpy2.get_context(), precision=bits):
        cr, ci = mpfr(c[0]), mpfr(c[1])
        x, y = mpfr(c[0]), mpfr(c[1])
        t = time.perf_counter()
        for _ in range(steps):
            a.send_bytes(gmpy2.to_binary(x) + b"\0SEP\0" + gmpy2.to_binary(y))
            s = (x + y) * (x - y) + cr
            x, y = s, gmpy2.mul_2exp(gmpy2.from_binary(a.recv_bytes()), 1) + ci
            float(x), float(y)
        dt = (time.perf_counter() - t) / steps
    a.send_bytes(b"")
    p.join()
    return dt


def flint_arb(threads):
    def run(c, bits, steps):
        import flint

        flint.ctx.prec, flint.ctx.threads = bits, threads
        cr, ci = flint.arb(c[0]), flint.arb(c[1])
        x = y = flint.arb(0)
        t = time.perf_counter()
        for _ in range(steps):
            x, y = ((x + y) * (x - y) + cr).mid(), (2 * x * y + ci).mid()
            float(x), float(y)
        return (time.perf_counter() - t) / steps
    return run


def device_orbit(device):
    def run(c, bits, steps):
        from farm.numerics import gpu_orbit
        from farm.numerics import period as per

        gpu = device.type & 4  # CL_DEVICE_TYPE_GPU
        steps = 4 * gpu_orbit.BATCH if gpu else min(steps, 64)
        o = gpu_orbit.DeviceOrbit(per.parse(c, bits), bits, device=device)
        try:
            o.run(gpu_orbit.BATCH if gpu else 8)  # builds and first launches
            t = time.perf_counter()
            o.run(steps)
            return (time.perf_counter() - t) / steps
        finally:
            o.close()
    return run


def newton_host(c, bits, steps):
    from farm.numerics import newton
    from farm.numerics import period as per
    from farm.numerics.mpfr_points import precision

    with precision(bits):  # as newton.py runs it (gmpy2 takes the context's precision)
        o = newton._newton_orbiter(per.parse(c, bits), bits)
        return stepped(o, steps, lambda: None, lambda: (o.value(), o.derivative()))


def device_newton(device):
    def run(c, bits, steps):
        from farm.numerics import gpu_newton
        from farm.numerics import period as per

        gpu = device.type & 4  # CL_DEVICE_TYPE_GPU
        steps = 4 * gpu_newton.GPU_BATCH if gpu else min(steps, 64)
        point = per.parse(c, bits)
        gpu_newton.run(point, bits, 8, device=device)  # builds and first launches
        t = time.perf_counter()
        gpu_newton.run(point, bits, steps, device=device)
        return (time.perf_counter() - t) / steps
    return run


def engines() -> dict:
    """The engines of the --orbits table (see the module's docstring)."""
    from farm.numerics import mpfr_threads
    from farm.numerics import period as per

    found = {"gmpy2 x^2-y^2": old_form, "gmpy2 (x+y)(x-y)": orbiter(per.GmpyOrbiter)}
    if mpfr_threads.available():
        found["MPFR 2 threads"] = orbiter(per.ThreadedOrbiter)
    found["2 processes"] = processes
    try:
        import flint  # noqa: F401

        found["flint arb 1 thr"] = flint_arb(1)
        found["flint arb 2 thr"] = flint_arb(2)
    except ImportError:
        pass
    try:
        from farm.numerics import gpu_orbit

        devices = gpu_orbit.devices(gpus_only=False)
    except ImportError:
        devices = []
    if devices:
        print(f"OpenCL NTT on {devices[0].name.strip()} ({devices[0].platform.name.strip()})")
        found["OpenCL NTT"] = device_orbit(devices[0])
    found["Newton MPFR"] = newton_host
    if devices:
        found["Newton OpenCL"] = device_newton(devices[0])
    return found


def orbits(rounds: int, only: str | None = None) -> None:
    """The --orbits table (``only``: comma-separated parts of the engines' names)."""
    import os

    found = engines()
    if only:
        found = {k: v for k, v in found.items() if any(part and part in k for part in only.split(","))}
    print(f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f}; best of {rounds}")
    print("digits  bits    " + "".join(f"{k:>20s}" for k in found))
    for digits in (10_000, 30_000, 100_000, 300_000):
        c, bits = centre(digits), int(digits * 3.3219) + 64
        best = dict.fromkeys(found, float("inf"))
        for _ in range(rounds):
            for name, run in found.items():
                best[name] = min(best[name], run(c, bits, steps_of(c, bits)))
        print(f"{digits:<7d} {bits:<7d} " + "".join(f"{v * 1e3:17.3f} ms" for v in best.values()),
              flush=True)
    print(f"load average after {os.getloadavg()[0]:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] + "\n\n" + __doc__.split("\n\n")[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="1920x1080", help="frame size (default %(default)s)")
    ap.add_argument("--only", default=",".join(CASES), help="cases, comma-separated")
    ap.add_argument("--out", help="directory for the jobs and stores (default: a temporary one)")
    ap.add_argument("--find-only", action="store_true",
                    help="write the jobs (farm find) and stop: render them later, elsewhere")
    ap.add_argument("--orbits", type=int, nargs="?", const=6, metavar="ROUNDS",
                    help="one reference-orbit step by engine, best of ROUNDS (default 6), instead")
    ap.add_argument("--engines", metavar="A,B",
                    help="--orbits: only the engines whose names contain one of these")
    args = ap.parse_args()
    if args.orbits:
        orbits(args.orbits, args.engines)
        return
    out = Path(args.out or tempfile.mkdtemp(prefix="farm-depth-"))
    out.mkdir(parents=True, exist_ok=True)
    for name in args.only.split(","):
        depth, structure, frames = CASES[name]
        job, find_s = find_job(name, depth, structure, frames, args.size, out)
        if args.find_only:
            print(f"{name:9s} {job} (farm find: {find_s:.1f} s)", flush=True)
            continue
        store = Path(specmod.load(str(job)).output.store)
        store.unlink(missing_ok=True)
        whole, stderr = render(job, video=frames > 1)
        split = phases(store)
        what = f"{frames} frames with video" if frames > 1 else "one frame"
        print(f"{name:9s} {depth:>10s} (structure to {structure}), {args.size}, {what}: whole command "
              f"{whole:.2f} s = reference orbit {split['reference_s']:.2f} s + start-up "
              f"{split['startup_s']:.2f} s + render {split['render_s']:.2f} s (kernels "
              f"{split['gpu_s']:.2f} s; the rest: Python's start and the store); farm find took "
              f"{find_s:.1f} s before", flush=True)
        for line in stderr.splitlines():  # the references and the timeline, not the progress
            if line.startswith("farm:") and "warning" not in line:
                print(f"          {line}")
    print(f"jobs and stores in {out}")


if __name__ == "__main__":
    main()
