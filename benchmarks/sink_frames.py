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
a segmented video does (farm/encode/segments.py: K encoders at once, the segments'
sinks sharing ``--threads`` frame threads, default one video's), joined, then removed.

Each run also says where its frames' time went (summed over frames, and as a share of
the wall time): reading the raw channels, the colour statistics (histogram rows),
colouring, each frame's whole time on its frame thread, the scheduler blocked writing
to the encoder (the encoder is the limit while it is), and the first frame's delay;
beside the wall seconds, the frame threads' CPU seconds in the same parts (the rest is
waiting: for the interpreter's lock, the GPU, a core).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from datapath import children_cpu, own_cpu  # noqa: E402
from encode import NullOutput as Dropped  # noqa: E402  (an ordered output that drops the frames)

from farm.color.methods import Style  # noqa: E402
from farm.encode.ffmpeg import VideoEncoder, VideoSettings  # noqa: E402
from farm.encode.sink import FrameSink  # noqa: E402
from farm.store.reader import Store  # noqa: E402


class Encoded(Dropped):
    """An ordered output that pipes the frames to x264 (the video is thrown away)."""

    def __init__(self, settings: VideoSettings, width: int, height: int):
        self.settings, self.size, self.i420 = settings, (width, height), False

    def take_i420(self) -> None:
        self.i420 = True

    def prepare(self) -> None:
        self.encoder = VideoEncoder(self.settings, *self.size, i420=self.i420)

    def write(self, f: int, rgb: object) -> None:
        self.encoder.write(rgb)  # type: ignore[arg-type]

    def close(self) -> Path:
        self.encoder.close().unlink()
        return Path(os.devnull)

    def abort(self) -> None:
        self.encoder.abort()


class Trace:
    """Seconds a sink's frames spent in each part (see the module's docstring): the
    reader's calls and the output's writes are wrapped, on the sink's own instance;
    colouring and writing the sink counts itself."""

    def __init__(self) -> None:
        import threading

        self.t0 = time.perf_counter()
        self.parts = {"read": 0.0, "statistics": 0.0, "frame": 0.0}
        self.cpu = dict.fromkeys(self.parts, 0.0)  # the same, in the frame threads' CPU seconds
        self.first: float | None = None
        self.lock = threading.Lock()

    def timed(self, part: str, call):
        def wrapped(*args, **kwargs):
            t, c = time.perf_counter(), time.thread_time()
            try:
                return call(*args, **kwargs)
            finally:
                with self.lock:
                    self.parts[part] += time.perf_counter() - t
                    self.cpu[part] += time.thread_time() - c
        return wrapped

    def watch(self, sink: FrameSink) -> FrameSink:
        sink.store.raw = self.timed("read", sink.store.raw)  # type: ignore[method-assign]
        # (a GPU colourer's frames come as byte planes; their histogram row counts twice)
        sink.store.planes = self.timed("read", sink.store.planes)  # type: ignore[method-assign]
        sink.store.histogram = self.timed("statistics", sink.store.histogram)  # type: ignore[method-assign]
        sink._frame = self.timed("frame", sink._frame)  # type: ignore[method-assign]  (a frame thread's whole frame)
        write = sink.output.write

        def first_write(*args):
            if self.first is None:
                self.first = time.perf_counter() - self.t0
            return write(*args)
        sink.output.write = first_write  # type: ignore[method-assign]
        return sink

    def line(self, wall: float, colour_s: float, write_s: float) -> str:
        parts = ", ".join(f"{k} {v:.2f} s" + (f" (CPU {self.cpu[k]:.2f})" if k in self.cpu else "")
                          for k, v in {**self.parts, "colour": colour_s}.items())
        first = "-" if self.first is None else f"{self.first:.2f} s"
        return (f"  frames' time: {parts}; blocked writing {write_s:.1f} s "
                f"({write_s / wall:.0%} of the wall); first frame written after {first}")


def cpu() -> float:
    """CPU seconds of this process and its finished children (ffmpeg)."""
    return own_cpu() + children_cpu()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store", type=Path)
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("--count", type=int, default=0, help="frames (default: to the end)")
    ap.add_argument("--encode", action="store_true", help="pipe the frames to x264")
    ap.add_argument("--threads", type=int, help="the sink's frame threads")
    ap.add_argument("--plain", default="", help="K plain ffmpeg processes to time, e.g. 1,4,16")
    ap.add_argument("--segments", type=int, default=0, help="encode in K segments (the whole store)")
    ap.add_argument("--processes", type=int, default=0,
                    help="K processes of this script with --encode, on K parts of the frames at once")
    args = ap.parse_args()
    if args.segments:
        segmented(args.store, args.segments, args.threads)
        return
    if args.processes:
        in_processes(args.store, args.processes, args.first, args.count, args.threads)
        return
    with Store(args.store) as s:
        spec, total = s.spec, s.frames
    count = args.count or total - args.first
    frames = range(args.first, min(total, args.first + count))
    w, h = spec.size
    if args.encode:
        settings = VideoSettings.from_spec(spec, Path("/tmp") / f"farm-sink-frames-{os.getpid()}.mp4")
        output: Dropped = Encoded(settings, w, h)
    else:
        output = Dropped()
    t0, c0 = time.perf_counter(), cpu()
    trace = Trace()
    sink = trace.watch(FrameSink(args.store, output, Style.from_settings(spec.color), spec.color.smoothing,
                                 frames, threads=args.threads))
    for f in range(total):  # every frame of a finished store is complete
        sink.frame_complete(f)
    sink.finish()
    wall, used = time.perf_counter() - t0, cpu() - c0
    print(f"{len(frames)} frames {w}x{h} ({'x264' if args.encode else 'coloured, dropped'}): "
          f"{wall:.2f} s, {len(frames) / wall:.1f} frames/s, {used:.1f} CPU s "
          f"({children_cpu():.1f} of them ffmpeg's)")
    print(trace.line(wall, sink.color_s, sink.write_s))
    if args.plain:
        plain(args.store, frames, [int(k) for k in args.plain.split(",")])


def segmented(store: Path, k: int, threads: int | None) -> None:
    """Every frame of the store, encoded in k segments and joined (the video removed)."""
    from farm.encode.segments import SegmentedSink

    with Store(store) as s:
        spec, total = s.spec, s.frames
    settings = VideoSettings.from_spec(spec, Path("/tmp") / "farm-sink-segments.mp4")
    t0, c0 = time.perf_counter(), cpu()
    trace = Trace()
    sink = SegmentedSink(store, settings, spec.size, Style.from_settings(spec.color),
                         spec.color.smoothing, total, k, frame_threads=threads)
    for part in sink.sinks:
        trace.watch(part)
    for f in range(total):
        sink.frame_complete(f)
    sink.finish().unlink()
    wall, used = time.perf_counter() - t0, cpu() - c0
    print(f"{total} frames in {len(sink.sinks)} segments ({threads or 'default'} frame threads each): "
          f"{wall:.2f} s, {total / wall:.1f} frames/s, {used:.1f} CPU s ({children_cpu():.1f} of them "
          f"ffmpeg's)")
    print(trace.line(wall, sink.color_s, sink.write_s))


def in_processes(store: Path, k: int, first: int, count: int, threads: int | None) -> None:
    """Frames ``first .. first+count-1`` split into k contiguous parts, each encoded by
    its own process of this script (``--encode``) at the same time: what segments would
    do with nothing shared between them."""
    import subprocess

    with Store(store) as s:
        count = count or s.frames - first
    cuts = [first + count * i // k for i in range(k + 1)]
    t0, c0 = time.perf_counter(), cpu()
    extra = ["--threads", str(threads)] if threads else []
    procs = [subprocess.Popen([sys.executable, __file__, str(store), "--encode", "--first", str(a),
                               "--count", str(b - a), *extra], stdout=subprocess.PIPE, text=True)
             for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    lines = [p.communicate()[0].strip().splitlines()[0] for p in procs]
    wall, used = time.perf_counter() - t0, cpu() - c0
    print(f"{count} frames in {k} processes: {wall:.2f} s, {count / wall:.1f} frames/s, {used:.1f} CPU s")
    for line in lines:
        print("  " + line)


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
