#!/usr/bin/env python3
"""The whole job as a user waits for it: render, video, encode, frames, on 1 and 2 GPUs.

Reproduces BENCHMARKS.md's rows on the heavy 1080p job with its video on one GPU and on
two (the section "The whole job, video included").

    python3 benchmarks/pipeline.py                       # heavy and light 1080p jobs
    python3 benchmarks/pipeline.py --runs render,video --jobs benchmarks/jobs/light_1080p.toml  # 1 GPU

For each job it times, as wall-clock seconds of the whole command (start-up
included):

* ``render``   ``farm render --no-video`` with 1 GPU (one process)
* ``video``    ``farm render`` with the video, 1 GPU
* ``render2``  ``farm render --no-video`` with 2 GPUs (one process, a worker thread
  each: the default on a 2-GPU machine), ``video2`` with video
* ``mpi2``     ``mpiexec -n 3 farm render --no-video`` (2 GPUs, one rank each),
  ``mpivideo2`` with video
* ``encode``   ``farm encode`` of the finished store (frames/s)
* ``frames``   ``farm frames`` of the finished store into PNGs (frames/s)

and prints one table row per job, then the timeline each render stored
(farm/runtime/timeline.py). "GPU device time" is the sum of the kernels' device time of the
1-GPU render. Every render starts from scratch (--restart). Results also go to
``$OUT/pipeline.json`` when OUT is set.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JOBS = [ROOT / "benchmarks/jobs/heavy_1080p.toml", ROOT / "benchmarks/jobs/light_1080p.toml"]
FARM = [sys.executable, "-m", "farm"]
SHARE = False  # --share-devices for the 2-worker runs (a CPU-only machine)


def _mpiexec() -> list[str]:
    exe = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
    if exe is None:
        raise SystemExit("no mpiexec for the 2-GPU runs")
    return [exe, "-n", "3"]


def timed(cmd: list[str], env: dict | None = None) -> tuple[float, str]:
    """(wall seconds, stderr) of a command that must succeed."""
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})})
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return wall, proc.stderr


def status(store: Path) -> dict:
    out = subprocess.run([*FARM, "status", str(store), "--json"], capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out)


def timeline(store: Path) -> list[str]:
    from farm.run.report import timeline_lines

    return timeline_lines(status(store)["run"])


def one_gpu_env() -> dict:
    """The first GPU only: NVIDIA's OpenCL honours CUDA_VISIBLE_DEVICES."""
    return {"CUDA_VISIBLE_DEVICES": os.environ.get("FARM_BENCH_GPU", "0")}


def bench_job(job: Path, runs: list[str], work: Path) -> dict:
    name = job.stem
    store, video = work / f"{name}.h5", work / f"{name}.mp4"
    common = ["--store", str(store), "--restart", "--quiet"]
    row: dict = {"job": name}
    logs: dict[str, list[str]] = {}
    for run in runs:
        if run in ("render", "video"):
            extra = ["--no-video"] if run == "render" else ["--video", str(video)]
            row[run], _ = timed([*FARM, "render", str(job), *common, *extra], one_gpu_env())
            logs[run] = timeline(store)
            if run == "render" or "gpu_s" not in row:
                row["gpu_s"] = status(store)["run"]["timeline"]["gpu_s"]
        elif run in ("render2", "video2"):
            extra = ["--no-video"] if run == "render2" else ["--video", str(video)]
            workers = ["--workers", "2"] if SHARE else []
            row[run], _ = timed([*FARM, "render", str(job), *common, *extra, *workers])
            logs[run] = timeline(store)
        elif run in ("mpi2", "mpivideo2"):
            extra = ["--no-video"] if run == "mpi2" else ["--video", str(video)]
            share = ["--share-devices"] if SHARE else []
            row[run], _ = timed([*_mpiexec(), *FARM, "render", str(job), *common, *extra, *share])
            logs[run] = timeline(store)
        elif run == "encode":
            frames = status(store)["frames"]
            wall, _ = timed([*FARM, "encode", str(store), "--video", str(video)], one_gpu_env())
            row["encode_fps"] = frames / wall
        elif run == "frames":
            frames = status(store)["frames"]
            out = work / f"{name}-png"
            shutil.rmtree(out, ignore_errors=True)
            wall, _ = timed([*FARM, "frames", str(store), "--out", str(out)], one_gpu_env())
            row["frames_fps"] = frames / wall
            shutil.rmtree(out, ignore_errors=True)
    row["timelines"] = logs
    return row


def table(rows: list[dict]) -> str:
    cols = [("job", "job", "{}"), ("gpu_s", "GPU device s", "{:.2f}"),
            ("render", "render s", "{:.2f}"), ("video", "with video s", "{:.2f}"),
            ("render2", "2 GPUs s", "{:.2f}"), ("video2", "2 GPUs + video s", "{:.2f}"),
            ("mpi2", "MPI 2 GPUs s", "{:.2f}"), ("mpivideo2", "MPI 2 GPUs + video s", "{:.2f}"),
            ("encode_fps", "encode fps", "{:.1f}"), ("frames_fps", "frames fps", "{:.1f}")]
    cols = [c for c in cols if any(c[0] in r for r in rows)]
    lines = ["| " + " | ".join(c[1] for c in cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = [c[2].format(r[c[0]]) if c[0] in r else "-" for c in cols]
        lines.append("| " + " | ".join(cells) + " |")
    extra = []
    for r in rows:
        if "video" in r and "gpu_s" in r:
            extra.append(f"{r['job']}: with video / GPU device time = {r['video'] / r['gpu_s']:.2f}")
        if "video" in r and "video2" in r:
            extra.append(f"{r['job']}: 1 GPU / 2 GPUs with video = {r['video'] / r['video2']:.2f}x")
        if "render" in r and "render2" in r:
            extra.append(f"{r['job']}: 1 GPU / 2 GPUs without video = {r['render'] / r['render2']:.2f}x")
        if "video" in r and "mpivideo2" in r:
            extra.append(f"{r['job']}: 1 GPU / 2 GPUs (MPI) with video = {r['video'] / r['mpivideo2']:.2f}x")
    return "\n".join(lines + [""] + extra)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", nargs="*", type=Path, default=JOBS)
    ap.add_argument("--runs", default="render,video,render2,video2,mpivideo2,encode,frames")
    ap.add_argument("--work", type=Path, help="folder for stores and videos (default: a temp folder)")
    ap.add_argument("--share-devices", action="store_true",
                    help="let the 2-worker runs share one device (to try the script on a CPU)")
    args = ap.parse_args()
    global SHARE
    SHARE = args.share_devices
    work = args.work or Path(tempfile.mkdtemp(prefix="farm-pipeline-"))
    work.mkdir(parents=True, exist_ok=True)
    runs = args.runs.split(",")
    rows = []
    for job in args.jobs:
        row = bench_job(job, runs, work)
        rows.append(row)
        print(f"== {row['job']}", flush=True)
        for run, lines in row["timelines"].items():
            print(f"-- {run}\n" + "\n".join(lines), flush=True)
    print()
    print(table(rows))
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "pipeline.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
