"""Whole-farm speed: kernel-alone rate, full renders with 1..N GPUs, balance, master load.

For a job, this measures
  * the kernel-alone rate: every tile of every frame rendered back to back on one
    device through TileRenderer, summing the kernels' device time;
  * full renders (`farm render`, store writes, histograms, master included): in one
    process, and under mpiexec with 1, 2, 4, ... workers (one GPU each);
and prints Giter/s (iterations = escape counts, max_iter for interior pixels), frames
per minute, speed-up and efficiency against one worker, each worker's busy share and
the master's busy share, all read back from the stores.

    python benchmarks/farm_scaling.py benchmarks/jobs/scaling.toml --workers 1,2,4 --out /tmp/s
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np

from farm import spec as specmod
from farm.compute.device import candidates
from farm.compute.render import TileRenderer
from farm.plan import make_plan


def job_iterations(store: Path) -> int:
    """Iterations the job costs: each pixel's count, or max_iter where it is interior."""
    total = 0
    with h5py.File(store) as f:
        max_iter = f["frames/max_iter"][...]
        for k in range(f["iterations"].shape[0]):
            it = f["iterations"][k].astype(np.int64)
            total += int(np.where(it == 0, max_iter[k], it).sum())
    return total


def kernel_alone(job: Path) -> float:
    """Seconds of kernel device time for every tile of the job on the first device."""
    plan = make_plan(specmod.load(job))
    info, device = candidates("auto")[0]
    renderer = TileRenderer(device, info, plan)
    renderer.render(plan.frames[0], plan.grid.tile(0))  # warm-up: build the programs
    seconds = 0.0
    for frame in plan.frames:
        for tile in plan.grid:
            seconds += renderer.render(frame, tile).kernel_seconds
    return seconds


def run_stats(store: Path) -> dict:
    with h5py.File(store) as f:
        run = f["runs"][0]
        rank = f["tiles/rank"][...]
        busy = {int(r): float(f["tiles/seconds"][...][rank == r].sum()) for r in np.unique(rank)}
        frames = f["iterations"].shape[0]
    wall = float(run["ended"] - run["started"])
    return {"wall": wall, "frames": frames, "master_busy": float(run["master_busy"]) / wall,
            "writer_busy": float(run["writer_busy"]) / wall,
            "busy": {r: b / wall for r, b in busy.items()}}


def render(job: Path, store: Path, workers: int | None, mpiexec: str, extra: list[str]) -> dict:
    cmd = [sys.executable, "-m", "farm", "render", str(job), "--store", str(store), "--no-video",
           "--quiet", "--restart", *extra]
    if workers is not None:
        cmd = [mpiexec, "-n", str(workers + 1), *cmd]
    t0 = time.monotonic()
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stderr}")
    stats = run_stats(store)
    stats["command_s"] = time.monotonic() - t0
    return stats


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("job", type=Path)
    ap.add_argument("--workers", default="1,2,4", help="MPI worker counts (one GPU each)")
    ap.add_argument("--out", type=Path, default=Path("/tmp/farm-scaling"))
    ap.add_argument("--mpiexec", default=shutil.which("mpiexec") or "mpiexec")
    ap.add_argument("--no-kernel-alone", action="store_true")
    ap.add_argument("--farm-args", default="", help="extra `farm render` options, e.g. --share-devices")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    counts = [int(n) for n in args.workers.split(",") if n]
    print(f"device: {candidates('auto')[0][0].describe()}", flush=True)

    rows = [("1 process", None)] + [(f"mpiexec {n} worker(s)", n) for n in counts]
    results = {}
    for label, n in rows:
        results[label] = render(args.job, args.out / f"run_{n or 0}.h5", n, args.mpiexec,
                                args.farm_args.split())
        print(f"{label}: {results[label]['wall']:.2f} s", flush=True)
    iters = job_iterations(args.out / "run_0.h5")
    kernel_s = None if args.no_kernel_alone else kernel_alone(args.job)

    frames = results["1 process"]["frames"]
    print(f"\njob {args.job}: {frames} frames, {iters / 1e9:.1f} Giter")
    if kernel_s:
        print(f"kernel alone (one device, tiles back to back): {kernel_s:.2f} s, "
              f"{iters / kernel_s / 1e9:.1f} Giter/s")
    base = results.get("mpiexec 1 worker(s)", results["1 process"])["wall"]
    print(f"\n{'run':<22} {'wall s':>8} {'frames/min':>10} {'Giter/s':>8} {'vs kernel':>9} "
          f"{'speed-up':>8} {'effic.':>6} {'master':>7} {'writer':>7}  worker busy shares")
    for label, n in rows:
        r = results[label]
        rate = iters / r["wall"] / 1e9
        vs_kernel = f"{iters / r['wall'] / (iters / kernel_s):9.2f}" if kernel_s else f"{'-':>9}"
        speedup = base / r["wall"]
        eff = speedup / (n or 1)
        shares = " ".join(f"{k}:{v:.2f}" for k, v in sorted(r["busy"].items()))
        print(f"{label:<22} {r['wall']:8.2f} {60 * frames / r['wall']:10.1f} {rate:8.1f} {vs_kernel} "
              f"{speedup:8.2f} {eff:6.2f} {r['master_busy']:7.3f} {r['writer_busy']:7.3f}  {shares}")
    (args.out / "results.json").write_text(json.dumps(
        {"iterations": iters, "kernel_alone_s": kernel_s, "runs": results}, indent=1, default=str))


if __name__ == "__main__":
    main()
