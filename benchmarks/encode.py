"""Colouring and video: colouring alone, `farm encode`, `farm frames`, ffmpeg, the sink, x264's settings.

Reproduces BENCHMARKS.md's rows on `farm encode` (frames/s on a GPU host; against ffmpeg
from PNG on 2 cores), the video's frame work and the expmap video (``--sink``), and the
encoder's settings (``--settings``).

    python benchmarks/encode.py [--store S | --size 1920x1080 --frames 60] [--out DIR]
                                [--presets ultrafast,veryfast,faster,medium] [--engines numpy,opencl]
                                [--methods shade,histogram] [--repeat N]
    python benchmarks/encode.py --frames 120 --repeat 2                 # the GPU machine (a minute)
    python benchmarks/encode.py --size 640x360 --frames 120 --repeat 3  # the 2-core machine
    python3 benchmarks/encode.py --store STORE --sink --first 1200 --count 600 --encode --plain 1,4,16
    python3 benchmarks/encode.py --store STORE --settings --first 120 --count 120

Without --store it renders a Seahorse Valley zoom (f64, widths 0.02 to 1e-7) with
`farm render --no-video`. Then it measures, on the same frames:

* colouring alone: every frame read from the store and coloured by each engine (numpy
  bands on every core; the OpenCL kernel on the best device) and method, output dropped;
* `farm encode STORE --method M` for each method (the store's other settings: crf,
  preset, codec), in as many segments as this machine gets (farm/encode/segments.py),
  and in one segment (FARM_ENCODE_SEGMENTS=1) where that differs; `farm frames STORE`
  (PNG); whole commands, start-up included, wall-clock and CPU seconds;
* ffmpeg encoding the PNGs that `farm frames` wrote, with the same codec settings
  (the 2-core target: `farm encode` at most 1.3x this);
* with --presets: ffmpeg from the PNGs with each x264 preset (and h264_nvenc where it
  works) at the store's crf: time, size, and quality against the PNGs (SSIM, PSNR).

Prints the measurements, then issue 11's table for this machine. frames/s are frames
of the store per wall-clock second; with --repeat N each command runs N times,
alternated, and the best is kept (a shared machine).

``--sink``: the video's frame sink (farm/encode/sink.py) as `farm encode` runs it, on
frames ``--first`` .. ``--first + --count - 1`` of a finished store (an expmap store's
frames are synthesised from its strips): frames/s, wall seconds and CPU seconds (this
process and ffmpeg). The frames are dropped (what reading, synthesis, the colour
statistics and colouring cost), or with ``--encode`` piped to one x264 with the store's
settings; ``--threads`` sets the sink's frame threads. With ``--plain K,..`` it then
writes the same frames, coloured, as raw RGB to /dev/shm and times K plain ffmpeg
processes on K parts of them (benchmarks/datapath.py), the bound a video cannot beat.

``--settings``: those frames coloured as the farm colours them (raw RGB in /dev/shm),
encoded once losslessly (libx264 ``-qp 0``, yuv420p: the reference) and then with each
setting: libx264 presets at CRF 18, CRFs at the default preset, libx265 where this
ffmpeg has it; one ffmpeg process each. Quality is the SSIM of each encode's frames
against the lossless one's (ffmpeg's ssim filter, "All", in dB); JSON to
``$OUT/encoder_settings.json`` when OUT is set.
"""

from __future__ import annotations

import argparse
import compileall
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from farm import spec as specmod
from farm.color.methods import Style
from farm.color.stats import Statistics
from farm.encode.ffmpeg import VideoSettings, choose_codec, codec_args, try_codec
from farm.encode.segments import segment_count
from farm.encode.sink import FrameSink, default_colourer
from farm.runtime.cores import usable_cores
from farm.runtime.media import ffmpeg_binary
from farm.store.reader import Store

SHM = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())

JOB = """
[view]
center = ["-0.743643887037158704752191506114774", "0.131825904205311970493132056385139"]
width = ["0.02", "1e-7"]
[image]
size = [{w}, {h}]
[animation]
frames = {frames}
[output]
store = "{store}"
"""


class NullOutput:
    """An ordered output that drops the frames, taken as a video's encoder takes them
    (the video's planes where the colourer makes them, farm/color/yuv.py)."""

    ordered = True

    def take_i420(self) -> None:
        pass

    def prepare(self) -> None:
        pass

    def write(self, f: int, rgb: np.ndarray) -> None:
        pass

    def close(self) -> Path:
        return Path(os.devnull)

    def abort(self) -> None:
        pass


def timed(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """(wall-clock seconds, CPU seconds of the command and its children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stderr=subprocess.DEVNULL, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def farm(*args: str, env: dict[str, str] | None = None) -> tuple[float, float]:
    return timed([sys.executable, "-m", "farm", *args], env)


def make_store(out: Path, size: tuple[int, int], frames: int) -> Path:
    store = out / "bench.h5"
    job = out / "bench.toml"
    job.write_text(JOB.format(w=size[0], h=size[1], frames=frames, store=store))
    seconds, _ = farm("render", str(job), "--no-video", "--quiet", "--restart")
    print(f"rendered {store} ({frames} frames {size[0]}x{size[1]}) in {seconds:.1f} s", file=sys.stderr)
    return store


def colour_only(store: Path, engine: str, method: str) -> float:
    with Store(store) as s:
        color = s.spec.color
        frames = s.frames
    style = Style.from_settings(specmod.Color(**{**color.__dict__, "method": method}))
    colourer = default_colourer(engine)
    t0 = time.perf_counter()
    sink = FrameSink(store, NullOutput(), style, color.smoothing, colourer=colourer)
    for f in range(frames):
        sink.frame_complete(f)
    sink.finish()
    return frames / (time.perf_counter() - t0)


def encoder_alone(store: Path, frames: int) -> float:
    """Frames/s of the farm's ffmpeg pipe (VideoEncoder, rgb24 in) fed one coloured
    frame ``frames`` times: the encoding side's ceiling without colouring or reading."""
    from farm.encode.ffmpeg import VideoEncoder

    with Store(store) as s:
        spec, raw = s.spec, s.raw(frames // 2)
        stats = Statistics(s.frames, 0).stats(frames // 2, s.histogram)
    rgb = default_colourer("numpy")(raw, stats, Style.from_settings(spec.color))
    settings = VideoSettings.from_spec(spec)
    out = Path(tempfile.mkdtemp(prefix="farm-enc-")) / "alone.mp4"
    t0 = time.perf_counter()
    enc = VideoEncoder(replace(settings, path=out), *spec.size)
    for _ in range(frames):
        enc.write(rgb)
    enc.close()
    rate = frames / (time.perf_counter() - t0)
    shutil.rmtree(out.parent, ignore_errors=True)
    return rate


def ffmpeg_from_pngs(pngs: Path, fps: int, codec: str, crf: int, preset: str,
                     video: Path) -> tuple[float, float]:
    cmd = [ffmpeg_binary(), "-hide_banner", "-loglevel", "error", "-framerate", str(fps),
           "-i", str(pngs / "frame_%05d.png"), *codec_args(codec, crf, preset),
           "-pix_fmt", "yuv420p", "-movflags", "+faststart", "-y", str(video)]
    return timed(cmd)


def quality(video: Path, pngs: Path, fps: int) -> tuple[float, float]:
    """(SSIM, PSNR dB) of the video's frames against the PNGs, averaged over frames."""
    cmd = [ffmpeg_binary(), "-hide_banner", "-i", str(video), "-framerate", str(fps),
           "-i", str(pngs / "frame_%05d.png"), "-lavfi",
           "[0:v]split[a][b];[1:v]format=yuv420p,split[c][d];[a][c]ssim;[b][d]psnr", "-f", "null", "-"]
    text = subprocess.run(cmd, capture_output=True, text=True, check=True).stderr
    ssim = re.search(r"SSIM .*All:([0-9.]+)", text)
    psnr = re.search(r"PSNR .*average:([0-9.inf]+)", text)
    return (float(ssim.group(1)) if ssim else float("nan"), float(psnr.group(1)) if psnr else float("nan"))


# --------------------------------------------------------------------------- --sink

class Encoded(NullOutput):
    """An ordered output that pipes the frames to x264 (the video is thrown away)."""

    def __init__(self, settings: VideoSettings, width: int, height: int):
        self.settings, self.size, self.i420 = settings, (width, height), False

    def take_i420(self) -> None:
        self.i420 = True

    def prepare(self) -> None:
        from farm.encode.ffmpeg import VideoEncoder

        self.encoder = VideoEncoder(self.settings, *self.size, i420=self.i420)

    def write(self, f: int, rgb: np.ndarray) -> None:
        self.encoder.write(rgb)

    def close(self) -> Path:
        Path(self.encoder.close()).unlink(missing_ok=True)
        return Path(os.devnull)

    def abort(self) -> None:
        self.encoder.abort()


def sink(store: Path, first: int, count: int, encode: bool, threads: int | None, plain: str) -> None:
    """The --sink measurement (see the module's docstring)."""
    from datapath import CPU, children_cpu, own_cpu, plain_ffmpeg, raw_frames

    with Store(store) as s:
        spec, total = s.spec, s.frames
    frames = range(first, min(total, first + (count or total - first)))
    w, h = spec.size
    output: NullOutput = NullOutput()
    if encode:
        video = Path(tempfile.gettempdir()) / f"farm-bench-sink-{os.getpid()}.mp4"
        output = Encoded(VideoSettings.from_spec(spec, video), w, h)
    t0, c0, k0 = time.perf_counter(), own_cpu() + children_cpu(), children_cpu()
    frame_sink = FrameSink(store, output, Style.from_settings(spec.color), spec.color.smoothing, frames,
                           threads=threads)
    for f in range(total):  # every frame of a finished store is complete
        frame_sink.frame_complete(f)
    frame_sink.finish()
    wall, used = time.perf_counter() - t0, own_cpu() + children_cpu() - c0
    print(f"{len(frames)} frames {w}x{h} ({'one x264' if encode else 'coloured, dropped'}): "
          f"{wall:.2f} s, {len(frames) / wall:.1f} frames/s, {used:.1f} CPU s "
          f"({children_cpu() - k0:.1f} of them ffmpeg's)", flush=True)
    if plain:
        with tempfile.TemporaryDirectory(dir=SHM) as tmp:
            raw, n, rw, rh, settings = raw_frames(store, Path(tmp), frames)
            for k in (int(x) for x in plain.split(",")):
                seconds = plain_ffmpeg(raw, n, rw, rh, settings, k, Path(tmp))
                print(f"plain ffmpeg, K = {k}: {seconds:.2f} s, {n / seconds:.1f} frames/s, "
                      f"{CPU['last']:.1f} CPU s", flush=True)


# --------------------------------------------------------------------------- --settings

SETTINGS = ([("libx264", p, 18) for p in ("ultrafast", "veryfast", "faster", "medium", "slow")]
            + [("libx264", "faster", c) for c in (14, 23, 28)]
            + [("libx265", "fast", c) for c in (18, 23)])


def raw_encode(raw: Path, size: tuple[int, int], fps: int, args: list[str], out: Path) -> float:
    cmd = [ffmpeg_binary(), "-hide_banner", "-loglevel", "error", "-f", "rawvideo", "-pix_fmt", "rgb24",
           "-s", f"{size[0]}x{size[1]}", "-framerate", str(fps), "-i", str(raw), *args,
           "-pix_fmt", "yuv420p", "-y", str(out)]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True)
    return time.perf_counter() - t0


def ssim_db(encoded: Path, reference: Path, fps: int) -> float:
    """SSIM of ``encoded`` against ``reference``, frame k against frame k (their
    timestamps differ: B-frame delay, MP4 and Matroska time bases)."""
    align = f"settb=1/{fps},setpts=N"
    cmd = [ffmpeg_binary(), "-hide_banner", "-i", str(encoded), "-i", str(reference),
           "-lavfi", f"[0:v]{align}[a];[1:v]{align}[b];[a][b]ssim", "-f", "null", "-"]
    text = subprocess.run(cmd, capture_output=True, text=True, check=True).stderr
    found = re.search(r"All:\s*[\d.]+\s*\(([\d.]+|inf)\)", text)
    if not found:
        raise SystemExit(f"no SSIM in ffmpeg's output:\n{text[-1000:]}")
    return float(found.group(1))


def encoder_settings(store: Path, first: int, count: int) -> None:
    """The --settings table (see the module's docstring)."""
    import json

    from datapath import raw_frames

    from farm.encode.ffmpeg import has_encoder

    with Store(store) as s:
        total = s.frames
    with tempfile.TemporaryDirectory(dir=SHM) as tmp:
        work = Path(tmp)
        chosen = range(first, min(total, first + (count or total)))
        raw, frames, w, h, settings = raw_frames(store, work, chosen)
        fps = settings["fps"]
        reference = work / "lossless.mkv"
        lossless = ["-c:v", "libx264", "-preset", "ultrafast", "-qp", "0"]
        t_ref = raw_encode(raw, (w, h), fps, lossless, reference)
        rows = [{"codec": "libx264", "preset": "ultrafast", "crf": "lossless (-qp 0)", "seconds": t_ref,
                 "fps": frames / t_ref, "mbit_s": reference.stat().st_size * 8 / (frames / fps) / 1e6,
                 "ssim_db": float("inf")}]
        for codec, preset, crf in SETTINGS:
            if not has_encoder(codec):
                print(f"(this ffmpeg has no {codec})")
                continue
            out = work / f"{codec}-{preset}-{crf}.mp4"
            seconds = raw_encode(raw, (w, h), fps, ["-c:v", codec, "-preset", preset, "-crf", str(crf)], out)
            rows.append({"codec": codec, "preset": preset, "crf": crf, "seconds": seconds,
                         "fps": frames / seconds, "mbit_s": out.stat().st_size * 8 / (frames / fps) / 1e6,
                         "ssim_db": ssim_db(out, reference, fps)})
            out.unlink()
    print(f"{frames} frames {w}x{h} at {fps} fps, frames {first}.. of {store}")
    print(f"{'codec':8} {'preset':10} {'crf':>16} {'seconds':>8} {'fps':>6} {'Mbit/s':>7} {'SSIM dB':>8}")
    for r in rows:
        print(f"{r['codec']:8} {r['preset']:10} {r['crf']!s:>16} {r['seconds']:8.2f} {r['fps']:6.1f} "
              f"{r['mbit_s']:7.1f} {r['ssim_db']:8.2f}")
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "encoder_settings.json").write_text(json.dumps(rows, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[:2]))
    ap.add_argument("--store", type=Path, help="a finished store (default: render one)")
    ap.add_argument("--size", default="1920x1080", help="of the store rendered without --store")
    ap.add_argument("--frames", type=int, default=60, help="of the store rendered without --store")
    ap.add_argument("--out", type=Path, help="working directory, kept (default: a temporary one, removed)")
    ap.add_argument("--presets", default="", help="x264 presets to compare, comma-separated")
    ap.add_argument("--engines", default="numpy,opencl", help="colourers to time alone")
    ap.add_argument("--methods", default="shade,histogram", help="colouring methods")
    ap.add_argument("--repeat", type=int, default=1,
                    help="runs of encode/frames/ffmpeg, alternated; the best of each is shown")
    ap.add_argument("--sink", action="store_true",
                    help="the video's frame sink on --store's frames, instead")
    ap.add_argument("--settings", action="store_true",
                    help="x264 presets and CRFs, and x265, on --store's frames, instead")
    ap.add_argument("--first", type=int, default=0, help="with --sink or --settings: the first frame")
    ap.add_argument("--count", type=int, default=0, help="with --sink or --settings: frames (default: all)")
    ap.add_argument("--encode", action="store_true", help="with --sink: pipe the frames to one x264")
    ap.add_argument("--threads", type=int, help="with --sink: the sink's frame threads")
    ap.add_argument("--plain", default="",
                    help="with --sink: K plain ffmpeg processes to time, e.g. 1,4,16")
    args = ap.parse_args()
    if args.sink or args.settings:
        if args.store is None:
            ap.error("--sink and --settings measure a finished store: give --store")
        if args.sink:
            sink(args.store, args.first, args.count, args.encode, args.threads, args.plain)
        else:
            encoder_settings(args.store, args.first, args.count)
        return
    # the farm's bytecode in place, as a pip install leaves it: where PYTHONDONTWRITEBYTECODE
    # is set (this project's CPU machines), every `python -m farm` it times would compile
    # the farm from source again (0.3 s of CPU at 640x360: the 2-core ratios rose by 0.2-0.3)
    compileall.compile_dir(Path(__file__).resolve().parents[1] / "farm", quiet=1)
    out = args.out or Path(tempfile.mkdtemp(prefix="farm-encode-"))
    out.mkdir(parents=True, exist_ok=True)
    w, h = (int(v) for v in args.size.split("x"))
    store = args.store or make_store(out, (w, h), args.frames)
    with Store(store) as s:
        spec, frames = s.spec, s.frames
        w, h = spec.size
    o = spec.output
    codec = choose_codec(o.codec, w - w % 2, h - h % 2)
    rows: list[tuple[str, str, str]] = []
    print(f"store {store}: {frames} frames {w}x{h}; {spec.color.method}, crf {o.crf}, "
          f"preset {o.preset}, codec {codec}; {os.cpu_count()} cores", file=sys.stderr)

    for engine in args.engines.split(","):
        for method in args.methods.split(","):
            try:
                rate = colour_only(store, engine, method)
            except Exception as err:  # noqa: BLE001 - e.g. no OpenCL device: report and go on
                rows.append((f"colour only, {engine}, {method}", "-", f"failed: {err}"))
                continue
            rows.append((f"colour only, {engine}, {method}", f"{rate:.1f}", ""))

    rows.append(("encoder alone (one frame piped, rgb24)", f"{encoder_alone(store, frames):.1f}",
                 "ffmpeg start included"))
    pngs = out / "png"
    methods = args.methods.split(",")
    segments = segment_count(frames, spec.animation.fps)
    runs: dict[str, tuple[float, float]] = {}

    def keep(name: str, result: tuple[float, float]) -> None:
        old = runs.get(name, (float("inf"), float("inf")))
        runs[name] = (min(old[0], result[0]), min(old[1], result[1]))

    one = {**os.environ, "FARM_ENCODE_SEGMENTS": "1"}
    for _ in range(args.repeat):  # alternate, keep the best of each (a shared machine)
        for m in methods:
            keep(f"encode {m}", farm("encode", str(store), "--video", str(out / f"farm_{m}.mp4"),
                                     "--method", m))
            if segments > 1:
                keep(f"encode1 {m}", farm("encode", str(store), "--video", str(out / f"farm1_{m}.mp4"),
                                          "--method", m, env=one))
        shutil.rmtree(pngs, ignore_errors=True)
        keep("frames", farm("frames", str(store), "--out", str(pngs)))
        keep("ffmpeg", ffmpeg_from_pngs(pngs, spec.animation.fps, codec, o.crf, o.preset, out / "ffmpeg.mp4"))
    t_ff, c_ff = runs["ffmpeg"]
    for m in methods:
        t, c = runs[f"encode {m}"]
        size = (out / f"farm_{m}.mp4").stat().st_size / 1e6
        rows.append((f"farm encode --method {m} ({segments} segment{'s' * (segments > 1)})",
                     f"{frames / t:.1f}",
                     f"{t:.2f} s, CPU {c:.2f} s, {size:.1f} MB; / ffmpeg {t / t_ff:.2f}"))
        if segments > 1:
            t1, c1 = runs[f"encode1 {m}"]
            rows.append((f"farm encode --method {m} (1 segment)", f"{frames / t1:.1f}",
                         f"{t1:.2f} s, CPU {c1:.2f} s; / ffmpeg {t1 / t_ff:.2f}"))
    if codec != "libx264":  # e.g. NVENC chosen: libx264 too, for comparison
        t_x, _ = farm("encode", str(store), "--video", str(out / "farm_x264.mp4"), "--codec", "libx264")
        rows.append(("farm encode --codec libx264", f"{frames / t_x:.1f}", f"{t_x:.2f} s"))
    t_png, c_png = runs["frames"]
    rows.append(("farm frames (PNG)", f"{frames / t_png:.1f}", f"{t_png:.2f} s, CPU {c_png:.2f} s"))
    rows.append((f"ffmpeg from PNG ({codec}, same settings)", f"{frames / t_ff:.1f}",
                 f"{t_ff:.2f} s, CPU {c_ff:.2f} s"))

    presets = [p for p in args.presets.split(",") if p]
    trials = [("libx264", p) for p in presets]
    if presets and try_codec("h264_nvenc", w - w % 2, h - h % 2) is None:
        trials.append(("h264_nvenc", "-"))
    for trial_codec, preset in trials:
        target = out / f"q_{trial_codec}_{preset}.mp4"
        t_q, _ = ffmpeg_from_pngs(pngs, spec.animation.fps, trial_codec, o.crf, preset, target)
        ssim, psnr = quality(target, pngs, spec.animation.fps)
        rows.append((f"ffmpeg {trial_codec} {preset} crf {o.crf}", f"{frames / t_q:.1f}",
                     f"{target.stat().st_size / 1e6:.2f} MB, SSIM {ssim:.4f}, PSNR {psnr:.2f} dB"))

    width = max(len(r[0]) for r in rows)
    print(f"{'step':<{width}}  {'frames/s':>8}  notes")
    for name, shown, note in rows:
        print(f"{name:<{width}}  {shown:>8}  {note}")
    print_issue_table(runs, methods, frames, (w, h), segments)
    if args.out is None:  # a temporary directory: its store and videos take gigabytes at 1080p
        shutil.rmtree(out, ignore_errors=True)


def print_issue_table(runs: dict[str, tuple[float, float]], methods: list[str], frames: int,
                      size: tuple[int, int], segments: int) -> None:
    """Issue 11's encode/frames rows for this machine."""
    cores = usable_cores()
    t_ff = runs["ffmpeg"][0]
    print(f"\n{size[0]}x{size[1]}, {frames} frames, {cores} cores, {segments} segment(s):")
    print("| figure | measured | target |\n|---|---|---|")
    for m in methods:
        t = runs[f"encode {m}"][0]
        print(f"| `farm encode --method {m}` | {frames / t:.1f} frames/s | >= 60 frames/s (GPU machine) |")
    rate = frames / runs["frames"][0]
    print(f"| `farm frames` (PNG) | {rate:.1f} frames/s | >= 30 frames/s (GPU machine) |")
    for m in methods:
        t = runs[f"encode {m}"][0]
        print(f"| `farm encode --method {m}` / ffmpeg from PNG | {t / t_ff:.2f} | <= 1.3 (2-core machine) |")


if __name__ == "__main__":
    main()
