"""Perturbation and skipping: the 1080p targets, the format crossover, and where the passes go.

Reproduces BENCHMARKS.md's skipping rows (Seahorse and minibrot frames, on a GPU and on
CPUs, and the 640x360 whole command) and the section "Perturbation and skipping".

    python benchmarks/skipping.py                         # a GPU: the 1080p targets
    python benchmarks/skipping.py --device cpu --scale 0.3334 --command benchmarks/jobs/seahorse_640.toml
    python benchmarks/skipping.py --device cpu --scale 0.1 --no-check   # a quick run on PoCL
    python benchmarks/skipping.py --depths                # crossover and skipping by depth
    python benchmarks/skipping.py --model --frames minibrot --pixels 100   # no device

Frames (the default), each rendered whole in the farm's 1024x1024 tiles after a warm-up:

* seahorse: the Seahorse centre -0.743643887037158704752191506114774
  +0.131825904205311970493132056385139i, width 1e-22, max_iter 50000 (its reference:
  the period-8007 nucleus 6e-33 from the centre);
* minibrot: centred on that nucleus, width 5e-32 (about five minibrot sizes), max_iter
  200000 (a tenth of the pixels are interior).

Rows: "plain" renders with the same reference but no skipping and no interior test
(the plain perturbation loop); "farm" is what `farm render` does. Columns: kernel
seconds summed over the tiles (OpenCL profiling events); effective Giter/s (each
pixel's count, max_iter where interior, over those seconds: rows compare directly);
loop passes per pixel (a step or a skip, from a second render that counts them:
device-independent); pixels equal to the plain row; pixels of a 32x18 check grid (every
(W/32)-th pixel of the frame) equal to exact MPFR counts (tests/reference.py, on the
host's cores). Targets: seahorse farm >= 2000 Giter/s on an H200 (--scale 1); minibrot
farm >= 10x its plain row. ``--command JOB`` also times the whole ``farm render JOB
--no-video`` command (the 2-core target: benchmarks/jobs/seahorse_640.toml in 2.4 s).

``--depths``: one ``--side`` x ``--side`` tile per row, after a warm-up: at pixel
spacings where several formats resolve the frame, each of them (the crossover behind
precision = "auto"), then perturbation with and without skipping from 1e-30 to 1e-400
(floatexp deltas below spacing 1e-305) at c = i and at a Seahorse Misiurewicz point.

``--model``: a Python model of kernels/perturb.cl's double loop on the farm's own
reference and skip table (farm/numerics/bla.py device_layout), for ``--pixels`` random
pixels of each 1080p frame: passes and iterations per pixel, where the single steps are
(by log10 |d| / |Z| and by the reference step m over the period) and the skips by level.
It rounds like Python's complex numbers, not like the kernel: its totals agree with the
kernel's passes/px to a few percent. No device is needed.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from conftest import make_spec  # noqa: E402
from reference import digits_for, escape_count_mpfr, misiurewicz, pixel_c  # noqa: E402

from farm.compute.device import candidates  # noqa: E402
from farm.compute.render import TileRenderer  # noqa: E402
from farm.plan import make_plan  # noqa: E402

NUCLEUS_8007 = ("-0.74364388703715870475219150611477977821525620794818128981688389",
                "0.13182590420531197049313205638514067897295227932891896620912772")
FRAMES = {
    "seahorse": (("-0.743643887037158704752191506114774", "0.131825904205311970493132056385139"),
                 "1e-22", 50000),
    "minibrot": (NUCLEUS_8007, "5e-32", 200000),
}
GRID = (32, 18)


def force_table_options(**options) -> None:
    """Every skip table the farm builds in this process made with ``options`` (eps,
    high_degree): perturbed_frame replaced wherever a farm module holds it."""
    import farm.compute.prep  # noqa: F401  (the modules that call it, loaded first)
    import farm.compute.render  # noqa: F401
    from farm.compute import perturbation

    original = perturbation.perturbed_frame

    def forced(*args, **kwargs):
        return original(*args, **{**kwargs, **options})

    for name, module in list(sys.modules.items()):
        if name.startswith("farm") and getattr(module, "perturbed_frame", None) is original:
            module.perturbed_frame = forced


def render(renderer: TileRenderer, plan) -> tuple[np.ndarray, float, np.ndarray | None]:
    """(counts (H, W), kernel seconds, loop passes (H, W) or None) of the whole frame."""
    w, h = plan.spec.size
    counts = np.zeros((h, w), np.uint32)
    steps = np.zeros((h, w), np.uint32) if renderer.count_steps else None
    seconds = 0.0
    for tile in plan.grid:
        res = renderer.render(plan.frames[0], tile)
        box = np.s_[tile.y0:tile.y0 + tile.height, tile.x0:tile.x0 + tile.width]
        counts[box] = res.arrays["iterations"]
        if steps is not None:
            steps[box] = res.arrays["steps"]
        seconds += res.kernel_seconds
    return counts, seconds, steps


def _exact(args) -> int:
    re, im, max_iter, digits = args
    return escape_count_mpfr(re, im, max_iter, 2.0, digits)


def exact_grid(center, width, size, max_iter) -> tuple[np.ndarray, tuple[slice, slice]]:
    """Exact counts of every (W/32)-th pixel of the frame (an (18, 32) array), and the
    slices that pick those pixels out of the frame."""
    from multiprocessing import get_context

    w, h = size
    step = w // GRID[0]
    cols, rows = range(step // 2, w, step), range(step // 2, h, step)
    digits = digits_for(width, size)
    jobs = [(*pixel_c(center, width, size, i, j), max_iter, digits) for j in rows for i in cols]
    with get_context("spawn").Pool(os.cpu_count()) as pool:
        counts = pool.map(_exact, jobs, chunksize=4)
    return np.array(counts).reshape(len(rows), len(cols)), np.s_[rows[0]::step, cols[0]::step]


def measure(device, name: str, scale: float, check: bool) -> list[dict]:
    center, width, max_iter = FRAMES[name]
    size = (max(32, int(1920 * scale)) // 32 * 32, max(18, int(1080 * scale)) // 18 * 18)
    spec = make_spec(size=size, center=center, width=(width, width), max_iter=max_iter,
                     tile=(1024, 1024), precision="perturb")
    plan = make_plan(spec)
    t0 = time.perf_counter()
    refs = plan.references()
    ref_seconds = time.perf_counter() - t0
    info, dev = device
    rows, plain = [], None
    want = where = None
    if check:
        want, where = exact_grid(center, width, size, max_iter)
    for mode, kw in (("plain", dict(skipping=False, interior=False)), ("farm", {})):
        renderer = TileRenderer(dev, info, plan, references=refs, **kw)
        render(renderer, plan)  # warm-up: builds the program and the skip table
        counts, seconds, _ = render(renderer, plan)
        _, _, steps = render(TileRenderer(dev, info, plan, references=refs, count_steps=True, **kw),
                             plan)
        assert steps is not None
        work = float(np.where(counts == 0, max_iter, counts).astype(np.int64).sum())
        plain = counts if plain is None else plain
        row = {"frame": name, "size": f"{size[0]}x{size[1]}", "max_iter": max_iter, "mode": mode,
               "seconds": seconds, "giter_s": work / seconds / 1e9,
               "passes_px": float(steps.mean()), "iter_px": work / counts.size,
               "equal_plain": float((counts == plain).mean()),
               "interior": float((counts == 0).mean()), "reference_s": ref_seconds}
        if want is not None:
            row["equal_exact"] = float((counts[where] == want).mean())
        rows.append(row)
    rows[1]["gain"] = rows[1]["giter_s"] / rows[0]["giter_s"]
    return rows


def whole_command(job: str) -> dict:
    """Seconds of ``farm render JOB --no-video`` into a fresh store (wall, and CPU of
    the process and its children)."""
    with tempfile.TemporaryDirectory() as tmp:
        store = str(Path(tmp) / "s.h5")
        before = os.times()
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "farm", "render", job, "--store", store,
                               "--no-video", "--quiet"], capture_output=True, text=True)
        wall = time.perf_counter() - t0
        after = os.times()
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return {"job": job, "wall_s": wall,
            "cpu_s": (after.children_user - before.children_user)
            + (after.children_system - before.children_system)}


def table(rows: list[dict]) -> str:
    head = (f"{'frame':<9} {'size':>9} {'max_iter':>8} {'mode':<6} {'kernel s':>9} {'Giter/s':>8} "
            f"{'gain':>6} {'passes/px':>9} {'iter/px':>8} {'=plain':>7} {'=exact':>7} {'interior':>8}")
    lines = [head, "-" * len(head)]
    for r in rows:
        exact = f"{100 * r['equal_exact']:6.2f}%" if "equal_exact" in r else "      -"
        gain = f"{r['gain']:5.1f}x" if "gain" in r else "     -"
        lines.append(f"{r['frame']:<9} {r['size']:>9} {r['max_iter']:>8} {r['mode']:<6} "
                     f"{r['seconds']:9.4f} {r['giter_s']:8.1f} {gain} {r['passes_px']:9.0f} "
                     f"{r['iter_px']:8.0f} {100 * r['equal_plain']:6.2f}% {exact} "
                     f"{100 * r['interior']:7.2f}%")
    return "\n".join(lines)


# --------------------------------------------------------------------------- --depths

SEAHORSE_GUESS = ("-0.7495257189675268990762843695478956", "0.1358767313452441176005715023602258")


def tile_rate(device, center, width, side, fmt, skipping=True):
    """(seconds, effective Giter/s, max_iter) of one tile of side x side pixels."""
    info, dev = device
    spec = make_spec(size=(side, side), center=center, width=(width, width), max_iter="auto",
                     tile=(side, side), precision="auto")
    plan = make_plan(spec)
    plan = make_plan(spec, stored=[(f.max_iter, fmt) for f in plan.frames])
    renderer = TileRenderer(dev, info, plan, references=plan.references(), skipping=skipping)
    frame, tile = plan.frames[0], plan.grid.tile(0)
    renderer.render(frame, tile)  # warm-up: builds the program (and the skip table)
    res = renderer.render(frame, tile)
    it = res.iterations.astype(np.int64)
    work = int(np.where(it == 0, frame.max_iter, it).sum())
    return res.kernel_seconds, work / res.kernel_seconds / 1e9, frame.max_iter


def depths(device, side: int) -> None:
    print(f"tile {side}x{side}\n")
    t0 = time.time()
    seahorse = misiurewicz(SEAHORSE_GUESS, 23, 2, 450)
    print(f"{'view':<14} {'width':>7} {'format':<16} {'max_iter':>9} {'seconds':>8} {'Giter/s':>9}")

    def row(name, center, width, fmt, skipping=True):
        secs, rate, mi = tile_rate(device, center, width, side, fmt, skipping)
        label = fmt + ("" if fmt != "perturb" else " +skip" if skipping else " noskip")
        print(f"{name:<14} {width:>7} {label:<16} {mi:>9} {secs:8.4f} {rate:9.2f}", flush=True)

    # crossover: f64's limit is spacing 1.3e-11; fp128 4.2e-25; quad-single 4.2e-26
    for width, fmts in (("1e-8", ["f64", "perturb"]), ("1e-18", ["fp128", "quad-single", "perturb"])):
        for fmt in fmts:
            row("misiurewicz", seahorse, width, fmt)
        row("misiurewicz", seahorse, width, "perturb", skipping=False)
    for name, center in (("c=i", ("0", "1")), ("misiurewicz", seahorse)):
        for width in ("1e-30", "1e-100", "1e-250", "1e-400"):
            row(name, center, width, "perturb", skipping=False)
            row(name, center, width, "perturb")
    print(f"\n({time.time() - t0:.0f} s)")


# --------------------------------------------------------------------------- --model

def model(name: str, pixels: int, eps: float | None, quadratic: bool, seed: int, min_level: int) -> None:
    import farm.numerics as num
    from farm.compute.perturbation import perturbed_frame
    from farm.numerics.bla import EPS, device_layout
    from farm.numerics.highdegree import TERMS

    eps = EPS if eps is None else eps
    center, width, max_iter = FRAMES[name]
    w, h = 1920, 1080
    plan = make_plan(make_spec(size=(w, h), center=center, width=(width, width), max_iter=max_iter,
                               tile=(1024, 1024), precision="perturb"))
    refs = plan.references()
    pf = perturbed_frame(plan, refs, plan.frames[0], interior=False, eps=eps, high_degree=not quadratic)
    ref = refs.refs[pf.ref]
    orbit = ref.orbit[:, 0] + 1j * ref.orbit[:, 1]
    last = len(orbit) - 1
    coef, radius = device_layout(pf.table)
    maps = coef[:, 0::2] + 1j * coef[:, 1::2]
    levels, rows = pf.table.levels, len(radius)
    r2 = num.escape_r2(plan.spec.iterations.escape_radius)
    hs = pf.h_m * 2.0**pf.h_e

    def valid(r: int, j: int, room: int, dmax: float) -> bool:
        row = r + (1 << (j - 1))
        return r % (1 << j) == 0 and row < rows and (1 << j) <= room and dmax < radius[row]

    by_ratio: collections.Counter = collections.Counter()
    by_m: collections.Counter = collections.Counter()
    skips: collections.Counter = collections.Counter()
    passes = iters = rebases = 0
    rng = np.random.default_rng(seed)
    for _ in range(pixels):
        col, row = int(rng.integers(0, w)), int(rng.integers(0, h))
        dc = complex((2 * col + 1 - w) + pf.ref_off[0], pf.ref_off[1] - (2 * row + 1 - h)) * hs
        d, m, n = 0j, 0, 0
        while n < max_iter:
            passes += 1
            dmax = max(abs(d.real), abs(d.imag))
            j = 0
            if m >= 1 and valid(m - 1, min_level, max_iter - n, dmax):
                j = min_level
                while j + 1 < levels and valid(m - 1, j + 1, max_iter - n, dmax):
                    j += 1
            if j:
                coefs = maps[(m - 1) + (1 << (j - 1))]
                d = sum(cf * d**p * dc**q for cf, (p, q) in zip(coefs, TERMS, strict=True))
                skips[j] += 1
            else:
                if m >= 1:
                    by_ratio[math.floor(math.log10(max(abs(d) / abs(orbit[m]), 1e-30)))] += 1
                by_m[min(9, int(10 * m / last))] += 1
                d = (2 * orbit[m] + d) * d + dc
            m += 1 << j
            n += 1 << j
            z = orbit[m] + d
            if abs(z) ** 2 > r2:
                break
            if m == last or abs(z) < abs(d):
                d, m = z, 0
                rebases += 1
        iters += n
    k = pixels
    print(f"{name}: reference period {ref.period or '-'} (orbit {len(orbit)}), eps {eps:.3g}, "
          f"{'quadratic' if quadratic else 'degree-4'} maps, skips from 2^{min_level} steps, "
          f"{k} random pixels of 1920x1080")
    print(f"passes/px {passes / k:.0f}, iterations/px {iters / k:.0f}, single steps/px "
          f"{sum(by_m.values()) / k:.0f}, skips/px {sum(skips.values()) / k:.0f}, "
          f"rebases and wraps/px {rebases / k:.1f}")
    steps = sum(by_ratio.values())
    print("single steps by log10(|d| / |Z(m)|):  " + "  ".join(
        f"{e}: {100 * c / steps:.0f}%" for e, c in sorted(by_ratio.items()) if c >= steps / 200))
    print("single steps by m / period (tenths):  " + "  ".join(
        f"{b / 10:.1f}: {100 * c / sum(by_m.values()):.0f}%" for b, c in sorted(by_m.items())))
    print("skips by level (2^j steps):           " + "  ".join(
        f"{j}: {c / k:.0f}" for j, c in sorted(skips.items())))


def main() -> None:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[:2]))
    ap.add_argument("--device", default="auto", help="auto | gpu | cpu (default: %(default)s)")
    ap.add_argument("--scale", type=float, default=1.0, help="frame size / 1920x1080 (default 1)")
    ap.add_argument("--frames", default="seahorse,minibrot", help="default: %(default)s")
    ap.add_argument("--no-check", action="store_true", help="skip the exact check grid")
    ap.add_argument("--command", metavar="JOB", help="also time `farm render JOB --no-video`")
    ap.add_argument("--eps", type=float, help="the skip tables' error bound (default: the farm's, "
                    "2^-53); for the accuracy/speed trade-off")
    ap.add_argument("--quadratic", action="store_true",
                    help="quadratic skip maps only (no degree-4 maps, farm/numerics/highdegree.py)")
    ap.add_argument("--json", action="store_true", help="the rows as JSON too")
    ap.add_argument("--depths", action="store_true",
                    help="the format crossover and skipping by depth, one tile a row")
    ap.add_argument("--side", type=int, default=1024, help="with --depths: the tile's side (default 1024)")
    ap.add_argument("--model", action="store_true", help="the loop's passes, modelled in Python (no device)")
    ap.add_argument("--pixels", type=int, default=40, help="with --model: random pixels (default 40)")
    ap.add_argument("--seed", type=int, default=1, help="with --model: the pixels' seed")
    ap.add_argument("--min-level", type=int, default=3,
                    help="with --model: shortest skip taken, 2^j steps (default 3: GPUs' "
                         "LaunchConfig.min_skip_level)")
    args = ap.parse_args()
    if args.model:
        for name in args.frames.split(","):
            model(name, args.pixels, args.eps, args.quadratic, args.seed, args.min_level)
        return
    if args.quadratic:
        os.environ["FARM_SKIP_DEGREE"] = "2"  # what the renderer's launch configuration reads
    table_options = ({} if args.eps is None else {"eps": args.eps}) | (
        {"high_degree": False} if args.quadratic else {})
    if table_options:
        force_table_options(**table_options)
    device = candidates(args.device)[0]
    print(f"device: {device[0].describe()}", flush=True)
    if args.depths:
        depths(device, args.side)
        return
    rows = []
    for name in args.frames.split(","):
        rows += measure(device, name, args.scale, not args.no_check)
    print(table(rows))
    by = {(r["frame"], r["mode"]): r for r in rows}
    if ("seahorse", "farm") in by:
        print(f"target seahorse farm >= 2000 Giter/s (H200, scale 1): "
              f"{by['seahorse', 'farm']['giter_s']:.0f}")
    if ("minibrot", "farm") in by:
        print(f"target minibrot farm >= 10x plain: {by['minibrot', 'farm']['gain']:.1f}x")
    extra = {}
    if args.command:
        extra = whole_command(args.command)
        print(f"farm render {args.command}: {extra['wall_s']:.2f} s wall, "
              f"{extra['cpu_s']:.2f} s CPU (target on 2 cores: <= 2.4 s)")
    if args.json:
        print(json.dumps({"device": device[0].describe(), "rows": rows, "command": extra}))


if __name__ == "__main__":
    main()
