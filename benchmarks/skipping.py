"""Skipping against minibrot references (issue 14): its targets, in one command.

    python benchmarks/skipping.py                         # a GPU: the 1080p targets
    python benchmarks/skipping.py --device cpu --scale 0.1   # a quick run on PoCL

Frames, each rendered whole in the farm's 1024x1024 tiles after a warm-up render:

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
host's cores). Targets: seahorse farm >= 2 Tier/s (2000 Giter/s) on an H200 (--scale
1); minibrot farm >= 10x its plain row.

``--command JOB`` also times the whole ``farm render JOB --no-video`` command (the
2-core target: benchmarks/jobs/seahorse_640.toml in 2.4 s or less).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from conftest import make_spec  # noqa: E402
from reference import digits_for, escape_count_mpfr, pixel_c  # noqa: E402

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="auto")
    ap.add_argument("--scale", type=float, default=1.0, help="frame size / 1920x1080 (default 1)")
    ap.add_argument("--frames", default="seahorse,minibrot")
    ap.add_argument("--no-check", action="store_true", help="skip the exact check grid")
    ap.add_argument("--command", metavar="JOB", help="also time `farm render JOB --no-video`")
    ap.add_argument("--eps", type=float, help="the skip tables' error bound (default: the farm's, "
                    "2^-53); for the accuracy/speed trade-off")
    ap.add_argument("--quadratic", action="store_true",
                    help="quadratic skip maps only (no degree-4 maps, farm/numerics/highdegree.py)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    table_options = ({} if args.eps is None else {"eps": args.eps}) | (
        {"high_degree": False} if args.quadratic else {})
    if table_options:  # every renderer's tables, through the function render.py calls
        import functools

        import farm.compute.render as render_mod
        render_mod.perturbed_frame = functools.partial(render_mod.perturbed_frame, **table_options)
    device = candidates(args.device)[0]
    print(f"device: {device[0].describe()}", flush=True)
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
