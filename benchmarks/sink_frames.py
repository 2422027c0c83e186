#!/usr/bin/env python3
"""The video sink on a range of a finished store's frames: colouring alone, or with x264.

    python3 benchmarks/sink_frames.py STORE [--first F] [--count N] [--encode] [--threads T]
                                            [--plain 1,4,16] [--segments K]

Runs the frame sink (farm/encode/sink.py) the way ``farm encode`` does, on frames
``F .. F+N-1`` only, and prints frames/s, wall and CPU seconds (this process and
ffmpeg), and the sink's own colouring and writing seconds. Without ``--encode`` the
coloured frames are dropped (what reading, synthesis and colouring cost); with it they
go to an x264 process with the store's settings (``/dev/null`` output). Meant to run
under py-spy to see where a sink's time goes (BENCHMARKS.md, "The data path").
With ``--plain K,..`` it then writes the same frames, coloured, as raw RGB to /dev/shm
and times K plain ffmpeg processes encoding K parts of them with the store's settings
(benchmarks/datapath.py's baseline) for each K. ``--segments K`` encodes the frames as
a segmented video does (farm/encode/segments.py: K encoders at once, each segment's
sink with ``--threads`` frame threads, default max(2, 8 // K)), joined, then removed.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from encode import NullOutput as Dropped  # noqa: E402  (an ordered output that drops the frames)

from farm.color.methods import Style  # noqa: E402
from farm.encode.ffmpeg import VideoEncoder, VideoSettings  # noqa: E402
from farm.encode.sink import FrameSink  # noqa: E402
from farm.store.reader import Store  # noqa: E402


class Encoded(Dropped):
    """An ordered output that pipes the frames to x264 (the video is thrown away)."""

    def __init__(self, settings: VideoSettings, width: int, height: int):
        self.encoder = VideoEncoder(settings, width, height)

    def write(self, f: int, rgb: object) -> None:
        self.encoder.write(rgb)  # type: ignore[arg-type]

    def close(self) -> Path:
        self.encoder.close().unlink()
        return Path(os.devnull)

    def abort(self) -> None:
        self.encoder.abort()


def cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store", type=Path)
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("--count", type=int, default=0, help="frames (default: to the end)")
    ap.add_argument("--encode", action="store_true", help="pipe the frames to x264")
    ap.add_argument("--threads", type=int, help="the sink's frame threads")
    ap.add_argument("--plain", default="", help="K plain ffmpeg processes to time, e.g. 1,4,16")
    ap.add_argument("--segments", type=int, default=0, help="encode in K segments (the whole store)")
    args = ap.parse_args()
    if args.segments:
        segmented(args.store, args.segments, args.threads)
        return
    with Store(args.store) as s:
        spec, total = s.spec, s.frames
    count = args.count or total - args.first
    frames = range(args.first, min(total, args.first + count))
    w, h = spec.size
    if args.encode:
        settings = VideoSettings.from_spec(spec, Path("/tmp") / "farm-sink-frames.mp4")
        output: Dropped = Encoded(settings, w, h)
    else:
        output = Dropped()
    t0, c0 = time.perf_counter(), cpu()
    sink = FrameSink(args.store, output, Style.from_settings(spec.color), spec.color.smoothing,
                     frames, threads=args.threads)
    for f in range(total):  # every frame of a finished store is complete
        sink.frame_complete(f)
    sink.finish()
    wall, used = time.perf_counter() - t0, cpu() - c0
    print(f"{len(frames)} frames {w}x{h} ({'x264' if args.encode else 'coloured, dropped'}): "
          f"{wall:.2f} s, {len(frames) / wall:.1f} frames/s, {used:.1f} CPU s; "
          f"sink colouring {sink.color_s:.1f} s, writing {sink.write_s:.1f} s")
    if args.plain:
        plain(args.store, frames, [int(k) for k in args.plain.split(",")])


def segmented(store: Path, k: int, threads: int | None) -> None:
    """Every frame of the store, encoded in k segments and joined (the video removed)."""
    from farm.encode.segments import SegmentedSink

    with Store(store) as s:
        spec, total = s.spec, s.frames
    settings = VideoSettings.from_spec(spec, Path("/tmp") / "farm-sink-segments.mp4")
    t0, c0 = time.perf_counter(), cpu()
    sink = SegmentedSink(store, settings, spec.size, Style.from_settings(spec.color),
                         spec.color.smoothing, total, k, frame_threads=threads)
    for f in range(total):
        sink.frame_complete(f)
    sink.finish().unlink()
    wall, used = time.perf_counter() - t0, cpu() - c0
    print(f"{total} frames in {len(sink.sinks)} segments ({threads or 'default'} frame threads each): "
          f"{wall:.2f} s, {total / wall:.1f} frames/s, {used:.1f} CPU s")


def plain(store: Path, frames: range, ks: list[int]) -> None:
    """Plain ffmpeg on the same frames, coloured by the farm into /dev/shm."""
    import tempfile

    from datapath import CPU, plain_ffmpeg, raw_frames

    with tempfile.TemporaryDirectory(dir="/dev/shm") as tmp:
        raw, count, w, h, settings = raw_frames(store, Path(tmp), frames)
        for k in ks:
            wall = plain_ffmpeg(raw, count, w, h, settings, k, Path(tmp))
            print(f"plain ffmpeg, K = {k}: {wall:.2f} s, {count / wall:.1f} frames/s, "
                  f"{CPU['last']:.1f} CPU s")

if __name__ == "__main__":
    main()
