#!/usr/bin/env python3
"""Scaling over GPUs: the whole job on 1..N GPUs of one host, and the render phase against the kernel alone.

Reproduces BENCHMARKS.md's rows on 2 GPUs against 1, `mpiexec -n 2`, the render phase
against the kernels' device time, the whole command against the issue's bound, and (with
``--phase``) the render phase on 4 GPUs against 1 and against the kernel alone.

    python3 benchmarks/gpu_scaling.py [--jobs A.toml,B.toml] [--configs 1,2,mpi1,mpi2,1nv,2nv]
                                      [--ffmpeg-ks 8,16] [--corun 16] [--work DIR]
                                      [--farm-args "..."]
    python3 benchmarks/gpu_scaling.py --phase benchmarks/jobs/scaling_deep_1024.toml --workers 1,2,4 \
        --no-single --kernel-every 8

For each job and each configuration, ``farm render --restart`` from scratch:

* ``N``     one process, N worker threads (``--workers N``: one GPU each), with the video;
* ``mpiN``  ``mpiexec -n N+1``: the master and N worker ranks (one GPU each), with the video;
* ``Nnv``   one process, N worker threads, ``--no-video`` (the render phase alone).

Each run's row: the whole command's seconds and CPU seconds (with its children's), its
timeline (start-up, render phase, the kernels' device time summed over GPUs, the video's
tail after the last tile), the speed-up
against the job's first configuration, and whether the store's data (every unit's pixel
channels, histograms, done flags: decoded, so compressed stores compare by their data)
is bitwise equal to the first configuration's. Stores are deleted once digested: a 1080p
job writes gigabytes.

``--ffmpeg-ks`` also times the best plain ffmpeg on the job's frames (benchmarks/datapath.py:
K processes on K parts of the frames, from raw RGB in memory), the bound a video cannot
beat, with their CPU seconds and those of colouring the frames alone. ``--corun K`` then
starts the render phase (``1nv``, a store of its own) and K plain ffmpeg processes on the
frames together (``K@N``: the ffmpeg processes at niceness N, ``K@idle`` in Linux's
SCHED_IDLE class, so that the render's threads come first; ``K@cpusA-B`` on cores A to B
only, the rest left to the render): the time until both are
done is what this machine gives the whole command's two large parts when they share
its cores (the whole command also colours
and feeds the frames; the issue's bound counts the two as if each had the machine to
itself). Everything goes to
``$OUT/gpu_scaling.json`` when OUT is set, after every run.

``--phase JOB``: the render phase of one job (``--no-video``), in one process and under
mpiexec with each of ``--workers`` worker ranks (one GPU each), against the kernel alone
(every ``--kernel-every``-th frame's tiles rendered back to back on one device through
TileRenderer, the kernels' device time summed): Giter/s (escape counts, max_iter for
interior pixels), frames per minute, speed-up and efficiency against one worker, each
worker's busy share and the master's (receiving, deciding, writing), read back from the
stores. "Phase" runs from the first tile's start to the last tile's end.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import xxhash

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from datapath import CPU, own_cpu, phases, plain_ffmpeg, raw_frames, run, sizes, store_status  # noqa: E402

JOBS = ["heavy_1080p", "minibrot_1080p", "light_4k"]


def store_digest(store: Path) -> list[str]:
    """One XXH3-128 digest per rendered unit of every pixel channel and histogram row as
    decoded, then one of the done flags: equal lists mean bitwise equal data."""
    from farm.plan.channels import channels_for
    from farm.store.reader import Store

    with Store(store) as s:
        names = [c.name for c in channels_for(s.spec.image.samples, s.spec.render.distance)]

        def unit(u: int) -> str:
            h = xxhash.xxh3_128()
            for a in s.read(u, names):
                h.update(np.ascontiguousarray(a).data)
            h.update(np.ascontiguousarray(s._live("histogram", u)).data)
            return h.hexdigest()

        with concurrent.futures.ThreadPoolExecutor(min(16, os.cpu_count() or 1)) as pool:
            digests = list(pool.map(unit, range(s.units)))
        flags = xxhash.xxh3_128()
        flags.update(np.ascontiguousarray(s.done()).data)
        flags.update(np.ascontiguousarray(s.unit_done()).data)
    return [*digests, flags.hexdigest()]


# --------------------------------------------------------------------------- the whole job

def command(config: str, job: Path, store: Path, video: Path, extra: list[str]) -> list[str]:
    farm = [sys.executable, "-m", "farm", "render", str(job), "--store", str(store), "--restart",
            "--quiet", *extra]
    if config.startswith("mpi"):
        n = int(config[3:])
        mpiexec = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or "mpiexec"
        return [mpiexec, "-n", str(n + 1), *farm, "--video", str(video)]
    n = int(config.removesuffix("nv"))
    tail = ["--no-video"] if config.endswith("nv") else ["--video", str(video)]
    return [*farm, "--workers", str(n), *tail]


def corun(job: Path, raw: Path, frames: int, w: int, h: int, settings: dict, k: int, work: Path,
          extra: list[str], nice: int | str = 0) -> dict:
    """``farm render --no-video`` and ``k`` plain ffmpeg processes on the raw frames (at
    niceness ``nice``), started together: seconds until both are done, and each one's own."""
    store, video = work / f"{job.stem}-corun.h5", work / f"{job.stem}-corun.mp4"
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        t0 = time.perf_counter()
        render = pool.submit(run, command("1nv", job, store, video, extra))
        encode = pool.submit(plain_ffmpeg, raw, frames, w, h, settings, k, work, nice)
        render_s, ffmpeg_s = render.result()[0], encode.result()
        both = time.perf_counter() - t0
    store.unlink()
    return {"both_s": round(both, 3), "render_s": round(render_s, 3), "ffmpeg_s": round(ffmpeg_s, 3)}


def gpus(config: str) -> int:
    return int(config.removeprefix("mpi").removesuffix("nv"))


# --------------------------------------------------------------------------- --phase

def job_iterations(store: Path, frames: range | None = None) -> int:
    """Iterations the job costs: each pixel's count, or max_iter where it is interior
    (the farm's reader: a compressed store's tiles are decoded by the farm, not HDF5)."""
    import h5py

    from farm.store.reader import Store

    with h5py.File(store, "r") as f:
        limits = f["frames/max_iter"][...]
    total = 0
    with Store(store) as s:
        for k in frames or range(s.frames):
            it = s.iterations(k).astype(np.int64)
            total += int(np.where(it == 0, limits[k], it).sum())
    return total


def kernel_alone(job: Path, frames: range) -> float:
    """Seconds of kernel device time for every tile of ``frames`` on the first device."""
    from farm import spec as specmod
    from farm.compute.device import candidates
    from farm.compute.render import TileRenderer
    from farm.plan import make_plan
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
    import h5py

    with h5py.File(store) as f:
        run = f["runs"][0]
        rank = f["tiles/rank"][...]
        seconds = f["tiles/seconds"][...]
        finished = f["tiles/finished"][...]
        busy = {int(r): float(seconds[rank == r].sum()) for r in np.unique(rank)}
        frames = f["frames/max_iter"].shape[0]
    first = np.unravel_index(np.argmin(finished), finished.shape)
    phase = float(finished.max() - (finished[first] - seconds[first]))
    wall = float(run["ended"] - run["started"])
    return {"wall": wall, "phase": phase, "frames": frames,
            "master_busy": float(run["master_busy"]) / phase,
            "writer_busy": float(run["writer_busy"]) / phase,
            "receive": float(run["master_receive"]) / phase,
            "busy": {r: b / phase for r, b in busy.items()}}


def phase_render(job: Path, store: Path, workers: int | None, mpiexec: str, extra: list[str]) -> dict:
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


def phase(args: argparse.Namespace) -> None:
    """The --phase table (see the module's docstring)."""
    from farm.compute.device import candidates

    args.out = args.work or Path("/tmp/farm-scaling")
    args.out.mkdir(parents=True, exist_ok=True)
    counts = [int(n) for n in args.workers.split(",") if n]
    print(f"device: {candidates('auto')[0][0].describe()}", flush=True)

    rows = [] if args.no_single else [("1 process", None)]
    rows += [(f"mpiexec {n} worker(s)", n) for n in counts]
    results = {}
    first_store = None
    for label, n in rows:
        store = args.out / f"run_{n or 0}.h5"
        results[label] = phase_render(args.phase, store, n, args.mpiexec, args.farm_args.split())
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
        sample_s = kernel_alone(args.phase, sample)
        rate = job_iterations(first_store, sample) / sample_s
        kernel_s = iters / rate  # the whole job at the sampled kernel-alone rate
        print(f"kernel alone (one device, tiles back to back, {len(sample)} of {frames} frames): "
              f"{sample_s:.2f} s, {rate / 1e9:.1f} Giter/s")
    print(f"\njob {args.phase}: {frames} frames, {iters / 1e9:.1f} Giter")
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


def main() -> None:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[:2]))
    ap.add_argument("--jobs", default=",".join(JOBS),
                    help="job files, or names under benchmarks/jobs (default: %(default)s)")
    ap.add_argument("--configs", default="1,2,mpi1,mpi2,1nv,2nv")
    ap.add_argument("--ffmpeg-ks", default="", help="plain-ffmpeg process counts to time (none: skip)")
    ap.add_argument("--corun", default="",
                    help="with --ffmpeg-ks: plain-ffmpeg process counts to run beside the render phase; "
                         "K@N runs them at niceness N, K@idle in SCHED_IDLE (the render first where they "
                         "compete)")
    ap.add_argument("--farm-args", default="", help="extra `farm render` options (CPU: --share-devices)")
    ap.add_argument("--work", type=Path, help="folder for the stores (default: a temporary one)")
    ap.add_argument("--phase", type=Path, metavar="JOB", help="the render phase of JOB on 1..N workers "
                    "against the kernel alone, instead of the whole jobs")
    ap.add_argument("--workers", default="1,2,4", help="with --phase: MPI worker counts (one GPU each)")
    ap.add_argument("--mpiexec", default=shutil.which("mpiexec", path=str(Path(sys.executable).parent))
                    or shutil.which("mpiexec") or "mpiexec",
                    help="with --phase (default: the venv's, else PATH's)")
    ap.add_argument("--no-kernel-alone", action="store_true", help="with --phase: skip the kernel alone")
    ap.add_argument("--kernel-every", type=int, default=1,
                    help="with --phase: kernel-alone rate over every k-th frame only (default 1: all)")
    ap.add_argument("--no-single", action="store_true", help="with --phase: skip the one-process render")
    args = ap.parse_args()
    if args.phase:
        phase(args)
        return
    work = args.work or Path(tempfile.mkdtemp(prefix="farm-scaling-"))
    work.mkdir(parents=True, exist_ok=True)
    configs = args.configs.split(",")
    extra = args.farm_args.split()
    out = Path(os.environ["OUT"], "gpu_scaling.json") if os.environ.get("OUT") else None
    results: dict = {"device": os.environ.get("FARM_BENCH_DEVICE", ""), "cores": os.cpu_count(),
                     "jobs": {}}
    for name in args.jobs.split(","):
        job = Path(name) if name.endswith(".toml") else ROOT / "benchmarks/jobs" / f"{name}.toml"
        rows: dict = {}
        results["jobs"][job.stem] = rows
        first_digest = None
        for config in configs:
            store, video = work / f"{job.stem}-{config}.h5", work / f"{job.stem}-{config}.mp4"
            wall, _ = run(command(config, job, store, video, extra))
            row = {"gpus": gpus(config), "wall_s": wall, "cpu_s": CPU["last"], **sizes(store),
                   **phases(store_status(store)["run"])}
            t0 = time.perf_counter()
            digest = store_digest(store)
            row["digest_s"] = time.perf_counter() - t0
            if first_digest is None:
                first_digest = digest
            row["identical"] = digest == first_digest
            if video.exists():
                row["video_bytes"] = video.stat().st_size
                video.unlink()
            keep_for_ffmpeg = args.ffmpeg_ks and config == configs[0]
            if not keep_for_ffmpeg:
                store.unlink()
            rows[config] = row
            print(f"{job.stem} {config}: {json.dumps(row)}", flush=True)
            if out:
                out.write_text(json.dumps(results, indent=1))
        base = work / f"{job.stem}-{configs[0]}.h5"
        if args.ffmpeg_ks and base.exists():
            shm = Path("/dev/shm") if Path("/dev/shm").is_dir() else work
            t0, c0 = time.perf_counter(), own_cpu()
            raw, frames, w, h, settings = raw_frames(base, shm)
            rows["colour_only_s"] = time.perf_counter() - t0
            rows["colour_only_cpu_s"] = own_cpu() - c0
            rows["plain_ffmpeg_s"], rows["plain_ffmpeg_cpu_s"] = {}, {}
            for k in args.ffmpeg_ks.split(","):
                rows["plain_ffmpeg_s"][k] = plain_ffmpeg(raw, frames, w, h, settings, int(k), work)
                rows["plain_ffmpeg_cpu_s"][k] = CPU["last"]
            for k in filter(None, args.corun.split(",")):
                count, _, nice = k.partition("@")
                how = nice if nice == "idle" or nice.startswith("cpus") else int(nice or 0)
                rows.setdefault("corun", {})[k] = corun(job, raw, frames, w, h, settings, int(count), work,
                                                        extra, how)
                print(f"{job.stem} render phase beside {k} plain ffmpeg: {rows['corun'][k]}", flush=True)
            raw.unlink()
            base.unlink()
            print(f"{job.stem} colouring alone {rows['colour_only_s']:.2f} s "
                  f"({rows['colour_only_cpu_s']:.1f} CPU s); plain ffmpeg {rows['plain_ffmpeg_s']} "
                  f"(CPU s {rows['plain_ffmpeg_cpu_s']})", flush=True)
        table(job.stem, rows, configs)
        if out:
            out.write_text(json.dumps(results, indent=1))
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)


def table(name: str, rows: dict, configs: list[str]) -> None:
    """One line per configuration; speed-ups against the first configuration of the
    same kind (with video / without)."""
    print(f"\n{name}: {'config':<6} {'whole s':>8} {'CPU s':>6} {'start-up':>8} {'render':>7} {'GPU s':>6} "
          f"{'tail':>6} {'x whole':>7} {'x render':>8} identical")
    bases: dict[bool, dict] = {}
    for config in configs:
        r = rows[config]
        nv = config.endswith("nv")
        base = bases.setdefault(nv, r)
        tail = r.get("video_tail_s")
        print(f"{'':<{len(name) + 1}} {config:<6} {r['wall_s']:8.2f} {r.get('cpu_s', 0):6.1f} "
              f"{r['startup_s']:8.2f} {r['render_phase_s']:7.2f} {r['gpu_s']:6.2f} "
              f"{'-' if tail is None else f'{tail:.2f}':>6} {base['wall_s'] / r['wall_s']:7.2f} "
              f"{base['render_phase_s'] / r['render_phase_s']:8.2f} {r['identical']}")
    print(flush=True)


if __name__ == "__main__":
    main()
