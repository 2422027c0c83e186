#!/usr/bin/env python3
"""How close `farm encode` can come to plain ffmpeg, and how close it comes.

    python3 benchmarks/encode_ceiling.py STORE [--k 16] [--rounds 3]

First the floor of any GPU-colouring program (``benchmarks/startup.py --floor``: the
interpreter, numpy, pyopencl, the platforms, a context, a cached kernel launched and
finished; it reads no store, so the floor is low). Then each round, one after another
on the same frames (the store's, coloured as the farm colours them, as raw RGB in
/dev/shm):

- ``plain``: K plain ffmpeg processes encoding K parts of the raw frames (the issue's
  baseline, benchmarks/datapath.py), with the cores it kept busy;
- ``colouring alone``: the farm's frame work for the same frames with nothing beside it
  (``benchmarks/sink_frames.py STORE``: reading and undoing zstd, the colour
  statistics, colouring on the GPU, the frames then dropped), for its CPU seconds;
- ``bound``: what `farm encode` needs at least when plain ffmpeg already keeps every core
  busy: plain's time, plus the frame work's CPU seconds spread over every core, plus
  the floor (no frame exists before a program has started and coloured one, and x264
  has nothing to do until then); and plain / bound, the best ratio open to it;
  ``with reading alone``: the same with only the reading's CPU seconds (every frame's
  byte planes read and zstd undone, on this thread, as `farm encode`'s frame threads
  read them): what the compressed store itself makes unavoidable;
- ``plain + colouring``: plain ffmpeg with the frame work beside it, in a process of its
  own started at the same moment: the same work packed by the machine itself, with no
  start on the way to the first frame;
- ``planes + colouring from the floor``: the best packing open to any design of
  `farm encode` that does the farm's frame work: the frame work in a process of its
  own from the first moment, and K plain ffmpeg processes given the same frames as
  ``yuv420p`` planes (no conversion left to ffmpeg, as the farm hands them over since
  d735b82) from the floor on, every segment at once;
- ``farm encode``: the command itself (its default segments), and plain / it.

Busy and idle core-seconds come from /proc/stat (benchmarks/busy.py).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from busy import Busy  # noqa: E402
from datapath import plain_ffmpeg, raw_frames  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store", type=Path)
    ap.add_argument("--k", type=int, default=16, help="plain ffmpeg processes")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    floor_text = subprocess.run([sys.executable, str(HERE / "startup.py"), "--floor"], capture_output=True,
                                text=True, check=True).stdout
    floor = float(re.search(r"total \(median of the runs\)\s+([\d.]+) s", floor_text).group(1))
    print(f"floor of a GPU-colouring program: {floor:.3f} s", flush=True)
    cores = os.cpu_count() or 1
    reading = _reading(args.store)
    print(f"reading alone: every frame's planes, zstd undone: {reading:.2f} CPU s", flush=True)
    raw, frames, w, h, settings = raw_frames(args.store, Path("/dev/shm"))
    planes = _planes(raw, w, h)
    work = Path("/tmp/farm-encode-ceiling")
    work.mkdir(exist_ok=True)
    video = work / "farm.mp4"
    try:
        for r in range(args.rounds):
            with Busy() as b:
                plain = plain_ffmpeg(raw, frames, w, h, settings, args.k, work)
            print(f"round {r + 1}: plain ffmpeg K={args.k}: {plain:.2f} s, {_cores(b)}", flush=True)
            alone = _sink(args.store)
            frame_cpu = float(re.search(r"([\d.]+) CPU s", alone).group(1))
            bound = plain + frame_cpu / cores + floor
            print(f"  colouring alone: {alone}", flush=True)
            print(f"  bound: {plain:.2f} + {frame_cpu:.1f} / {cores} + {floor:.2f} = {bound:.2f} s; "
                  f"plain / bound {plain / bound:.2f}; with reading alone "
                  f"{plain / (plain + reading / cores + floor):.2f}", flush=True)
            with Busy() as b:
                t0 = time.perf_counter()
                sink = subprocess.Popen([sys.executable, str(HERE / "sink_frames.py"), str(args.store)],
                                        stdout=subprocess.PIPE, text=True)
                plain_beside = plain_ffmpeg(raw, frames, w, h, settings, args.k, work)
                sink_line = sink.communicate()[0].splitlines()[0]
                both = time.perf_counter() - t0
            print(f"  plain + colouring: {both:.2f} s (plain {plain_beside:.2f} s; the sink: {sink_line}), "
                  f"{_cores(b)}; plain / this {plain / both:.2f}", flush=True)
            with Busy() as b:
                t0 = time.perf_counter()
                sink = subprocess.Popen([sys.executable, str(HERE / "sink_frames.py"), str(args.store)],
                                        stdout=subprocess.PIPE, text=True)
                plain_planes = plain_ffmpeg(planes, frames, w, h, settings, args.k, work, pix_fmt="yuv420p",
                                            delay=floor)
                sink.communicate()
                packed = time.perf_counter() - t0
            print(f"  planes + colouring from the floor: {packed:.2f} s (plain on planes "
                  f"{plain_planes:.2f} s, {floor:.2f} of it waiting), {_cores(b)}; "
                  f"plain / this {plain / packed:.2f}", flush=True)
            with Busy() as b:
                t0 = time.perf_counter()
                cmd = [sys.executable, "-m", "farm", "encode", str(args.store), "--video", str(video)]
                subprocess.run(cmd, check=True, stderr=subprocess.DEVNULL)
                farm = time.perf_counter() - t0
            print(f"  farm encode: {farm:.2f} s, {_cores(b)}; plain / this {plain / farm:.2f}", flush=True)
    finally:
        raw.unlink()
        planes.unlink()
        video.unlink(missing_ok=True)


def _planes(raw: Path, w: int, h: int) -> Path:
    """The raw RGB frames as yuv420p planes, converted as the farm converts them
    (farm/color/yuv.py), beside them."""
    import numpy as np

    from farm.color.yuv import from_rgb

    out = raw.with_suffix(".yuv")
    frame = w * h * 3
    with open(raw, "rb") as src, open(out, "wb") as dst:
        while chunk := src.read(frame):
            dst.write(from_rgb(np.frombuffer(chunk, np.uint8).reshape(h, w, 3)).data.tobytes())
    return out


def _reading(store: Path) -> float:
    """CPU seconds to read every frame of the store as the GPU colourer takes it (its
    channels' byte planes, zstd undone: farm/store/reader.py, Store.planes)."""
    import resource

    from farm.store.reader import Store

    def cpu() -> float:
        use = resource.getrusage(resource.RUSAGE_SELF)
        return use.ru_utime + use.ru_stime

    with Store(store) as s:
        if s.planes(0) is None:
            raise SystemExit(f"{store}: frames not read as byte planes (uncompressed, or several tiles)")
        c0 = cpu()
        for f in range(s.frames):
            s.planes(f)
        return cpu() - c0


def _sink(store: Path) -> str:
    """The first line of ``sink_frames.py STORE``: frames, seconds, frames/s, CPU seconds."""
    done = subprocess.run([sys.executable, str(HERE / "sink_frames.py"), str(store)], capture_output=True,
                          text=True, check=True)
    return done.stdout.splitlines()[0]


def _cores(b: Busy) -> str:
    last = b.report().splitlines()[-1].strip()  # "wall W s, busy B core-s, idle I core-s"
    return last.split(", ", 1)[1]


if __name__ == "__main__":
    main()
