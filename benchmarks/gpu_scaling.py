#!/usr/bin/env python3
"""The whole job on 1..N GPUs of one host, as a user waits for it (issue 22).

    python3 benchmarks/gpu_scaling.py [--jobs A.toml,B.toml] [--configs 1,2,mpi1,mpi2,1nv,2nv]
                                      [--ffmpeg-ks 8,16] [--corun 16] [--work DIR]
                                      [--farm-args "..."]

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
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import shutil
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", default=",".join(JOBS),
                    help="job files, or names under benchmarks/jobs (default: %(default)s)")
    ap.add_argument("--configs", default="1,2,mpi1,mpi2,1nv,2nv")
    ap.add_argument("--ffmpeg-ks", default="", help="plain-ffmpeg process counts to time (none: skip)")
    ap.add_argument("--corun", default="",
                    help="with --ffmpeg-ks: plain-ffmpeg process counts to run beside the render phase; "
                         "K@N runs them at niceness N, K@idle in SCHED_IDLE (the render first where they "
                         "compete)")
    ap.add_argument("--farm-args", default="", help="extra `farm render` options (CPU: --share-devices)")
    ap.add_argument("--work", type=Path)
    args = ap.parse_args()
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
