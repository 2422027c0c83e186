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


def job_iterations(store: Path, frames: range | None = None) -> int:
    """Iterations the job costs: each pixel's count, or max_iter where it is interior."""
    total = 0
    with h5py.File(store) as f:
        max_iter = f["frames/max_iter"][...]
        for k in frames or range(f["iterations"].shape[0]):
            it = f["iterations"][k].astype(np.int64)
            total += int(np.where(it == 0, max_iter[k], it).sum())
    return total


def kernel_alone(job: Path, frames: range) -> float:
    """Seconds of kernel device time for every tile of ``frames`` on the first device."""
    from farm.run import compute_reference

    plan = make_plan(specmod.load(job))
    info, device = candidates("auto")[0]
    renderer = TileRenderer(device, info, plan, references=compute_reference(plan, progress=False))
    renderer.render(plan.frames[0], plan.grid.tile(0))  # warm-up: build the programs
    seconds = 0.0
    for frame in (plan.frames[k] for k in frames):
        for tile in plan.grid:
            seconds += renderer.render(frame, tile).kernel_seconds
    return seconds


def run_stats(store: Path) -> dict:
    """Times of the store's first run. ``wall``: from opening the store to the end, with
    the workers' start (OpenCL context, program build); ``phase``: from the first tile's
    start (its finish time less its kernel time) to the last tile's finish."""
    with h5py.File(store) as f:
        run = f["runs"][0]
        rank = f["tiles/rank"][...]
        seconds = f["tiles/seconds"][...]
        finished = f["tiles/finished"][...]
        busy = {int(r): float(seconds[rank == r].sum()) for r in np.unique(rank)}
        frames = f["iterations"].shape[0]
    first = np.unravel_index(np.argmin(finished), finished.shape)
    phase = float(finished.max() - (finished[first] - seconds[first]))
    wall = float(run["ended"] - run["started"])
    return {"wall": wall, "phase": phase, "frames": frames,
            "master_busy": float(run["master_busy"]) / phase,
            "writer_busy": float(run["writer_busy"]) / phase,
            "receive": float(run["master_receive"]) / phase,
            "busy": {r: b / phase for r, b in busy.items()}}


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
    ap.add_argument("--kernel-every", type=int, default=1,
                    help="kernel-alone rate over every k-th frame only (default 1: all)")
    ap.add_argument("--no-single", action="store_true", help="skip the one-process render")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    counts = [int(n) for n in args.workers.split(",") if n]
    print(f"device: {candidates('auto')[0][0].describe()}", flush=True)

    rows = [] if args.no_single else [("1 process", None)]
    rows += [(f"mpiexec {n} worker(s)", n) for n in counts]
    results = {}
    first_store = None
    for label, n in rows:
        store = args.out / f"run_{n or 0}.h5"
        results[label] = render(args.job, store, n, args.mpiexec, args.farm_args.split())
        print(f"{label}: phase {results[label]['phase']:.2f} s", flush=True)
        if first_store is None:
            first_store = store
        else:
            store.unlink()  # a 1080p job writes gigabytes
    iters = job_iterations(first_store)
    frames = results[rows[0][0]]["frames"]
    kernel_s = None
    if not args.no_kernel_alone:
        sample = range(0, frames, args.kernel_every)
        sample_s = kernel_alone(args.job, sample)
        rate = job_iterations(first_store, sample) / sample_s
        kernel_s = iters / rate  # the whole job at the sampled kernel-alone rate
        print(f"kernel alone (one device, tiles back to back, {len(sample)} of {frames} frames): "
              f"{sample_s:.2f} s, {rate / 1e9:.1f} Giter/s")
    print(f"\njob {args.job}: {frames} frames, {iters / 1e9:.1f} Giter")
    base = results[rows[1][0] if len(rows) > 1 and rows[0][1] is None else rows[0][0]]["phase"]
    print("\nphase: first tile's start to last tile's end (wall: from opening the store, with the")
    print("workers' start); rates, frames/min, speed-up and busy shares are over the phase.")
    print(f"\n{'run':<22} {'wall s':>7} {'phase s':>7} {'frames/min':>10} {'Giter/s':>8} "
          f"{'vs kernel':>9} {'speed-up':>8} {'effic.':>6} {'recv':>6} {'decide':>6} {'writer':>6}"
          "  worker busy")
    for label, n in rows:
        r = results[label]
        rate = iters / r["phase"] / 1e9
        vs_kernel = f"{kernel_s / r['phase']:9.2f}" if kernel_s else f"{'-':>9}"
        speedup = base / r["phase"]
        eff = speedup / (n or 1)
        shares = " ".join(f"{k}:{v:.2f}" for k, v in sorted(r["busy"].items()))
        print(f"{label:<22} {r['wall']:7.2f} {r['phase']:7.2f} {60 * frames / r['phase']:10.1f} "
              f"{rate:8.1f} {vs_kernel} {speedup:8.2f} {eff:6.2f} {r['receive']:6.3f} "
              f"{r['master_busy']:6.3f} {r['writer_busy']:6.3f}  {shares}")
    (args.out / "results.json").write_text(json.dumps(
        {"iterations": iters, "kernel_alone_s": kernel_s, "runs": results}, indent=1, default=str))


if __name__ == "__main__":
    main()
