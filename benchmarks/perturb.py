"""Perturbation on real deep frames: the format crossover, and what skipping buys.

One 1024x1024 tile per row, rendered on the first device after a warm-up; the rate
is the frame's iterations (each pixel's count, max_iter where interior) over the
kernel's device time, so rows with and without skipping compare directly.

* crossover: at pixel spacings where several formats resolve the frame, each of them
  on the same frame (the order precision="auto" uses follows from these rates);
* depth: perturbation with and without skipping (BLA) from 1e-30 to 1e-400 (floatexp
  deltas for pixel spacings below 1e-305) at two locations.

    python benchmarks/perturb.py [--device gpu] [--side 1024]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from conftest import make_spec  # noqa: E402
from reference import misiurewicz  # noqa: E402

from farm.compute.device import candidates  # noqa: E402
from farm.compute.render import TileRenderer  # noqa: E402
from farm.plan import make_plan  # noqa: E402

SEAHORSE_GUESS = ("-0.7495257189675268990762843695478956", "0.1358767313452441176005715023602258")


def frame_rate(device, center, width, side, fmt, skipping=True):
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="auto")
    ap.add_argument("--side", type=int, default=1024)
    args = ap.parse_args()
    device = candidates(args.device)[0]
    print(f"device: {device[0].describe()}; tile {args.side}x{args.side}\n")
    t0 = time.time()
    seahorse = misiurewicz(SEAHORSE_GUESS, 23, 2, 450)
    print(f"{'view':<14} {'width':>7} {'format':<16} {'max_iter':>9} {'seconds':>8} {'Giter/s':>9}")

    def row(name, center, width, fmt, skipping=True):
        secs, rate, mi = frame_rate(device, center, width, args.side, fmt, skipping)
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


if __name__ == "__main__":
    main()
