"""Colour and video speed: colouring alone, `farm encode`, `farm frames`, and ffmpeg itself.

    python benchmarks/encode.py [--store S | --size 1920x1080 --frames 60] [--out DIR]
                                [--presets ultrafast,veryfast,faster,medium] [--engines numpy,opencl]
                                [--repeat N]

Without --store it renders a Seahorse Valley zoom (f64, widths 0.02 to 1e-7) with
`farm render --no-video`. Then it measures, on the same frames:

* colouring alone: every frame read from the store and coloured by each engine (numpy
  bands on every core; the OpenCL kernel on the best device) and method, output dropped;
* `farm encode STORE` (the store's settings: method, crf, preset, codec) and
  `farm frames STORE` (PNG), whole commands, start-up included;
* ffmpeg encoding the PNGs that `farm frames` wrote, with the same codec settings
  (the 2-core target: `farm encode` at most 1.3x this);
* with --presets: ffmpeg from the PNGs with each x264 preset (and h264_nvenc where it
  works) at the store's crf: time, size, and quality against the PNGs (SSIM, PSNR).

Prints one table; frames/s are frames of the store per wall-clock second.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from farm import spec as specmod
from farm.color.methods import Style
from farm.encode.ffmpeg import choose_codec, codec_args, ffmpeg_binary, try_codec
from farm.encode.sink import FrameSink, default_colourer
from farm.store.reader import Store

JOB = """
[view]
center = ["-0.743643887037158704752191506114774", "0.131825904205311970493132056385139"]
width = ["0.02", "1e-7"]
[image]
size = [{w}, {h}]
[animation]
frames = {frames}
[render]
tile = [256, 256]
[output]
store = "{store}"
"""


class NullOutput:
    ordered = True

    def write(self, f: int, rgb: np.ndarray) -> None:
        pass

    def close(self) -> Path:
        return Path(os.devnull)

    def abort(self) -> None:
        pass


def farm(*args: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "farm", *args], check=True, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def make_store(out: Path, size: tuple[int, int], frames: int) -> Path:
    store = out / "bench.h5"
    job = out / "bench.toml"
    job.write_text(JOB.format(w=size[0], h=size[1], frames=frames, store=store))
    seconds = farm("render", str(job), "--no-video", "--quiet", "--restart")
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


def ffmpeg_from_pngs(pngs: Path, fps: int, codec: str, crf: int, preset: str, video: Path) -> float:
    cmd = [ffmpeg_binary(), "-hide_banner", "-loglevel", "error", "-framerate", str(fps),
           "-i", str(pngs / "frame_%05d.png"), *codec_args(codec, crf, preset),
           "-pix_fmt", "yuv420p", "-movflags", "+faststart", "-y", str(video)]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True)
    return time.perf_counter() - t0


def quality(video: Path, pngs: Path, fps: int) -> tuple[float, float]:
    """(SSIM, PSNR dB) of the video's frames against the PNGs, averaged over frames."""
    cmd = [ffmpeg_binary(), "-hide_banner", "-i", str(video), "-framerate", str(fps),
           "-i", str(pngs / "frame_%05d.png"), "-lavfi",
           "[0:v]split[a][b];[1:v]format=yuv420p,split[c][d];[a][c]ssim;[b][d]psnr", "-f", "null", "-"]
    text = subprocess.run(cmd, capture_output=True, text=True, check=True).stderr
    ssim = re.search(r"SSIM .*All:([0-9.]+)", text)
    psnr = re.search(r"PSNR .*average:([0-9.inf]+)", text)
    return (float(ssim.group(1)) if ssim else float("nan"), float(psnr.group(1)) if psnr else float("nan"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", type=Path, help="a finished store (default: render one)")
    ap.add_argument("--size", default="1920x1080")
    ap.add_argument("--frames", type=int, default=60)
    ap.add_argument("--out", type=Path, help="working directory (default: a temporary one)")
    ap.add_argument("--presets", default="", help="x264 presets to compare, comma-separated")
    ap.add_argument("--engines", default="numpy,opencl")
    ap.add_argument("--methods", default="shade,histogram")
    ap.add_argument("--repeat", type=int, default=1,
                    help="runs of encode/frames/ffmpeg, alternated; the best of each is shown")
    args = ap.parse_args()
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

    video, pngs = out / "farm.mp4", out / "png"
    t_enc = t_png = t_ff = float("inf")
    for _ in range(args.repeat):  # alternate, keep the best of each (a shared machine)
        t_enc = min(t_enc, farm("encode", str(store), "--video", str(video)))
        shutil.rmtree(pngs, ignore_errors=True)
        t_png = min(t_png, farm("frames", str(store), "--out", str(pngs)))
        t_ff = min(t_ff, ffmpeg_from_pngs(pngs, spec.animation.fps, codec, o.crf, o.preset,
                                          out / "ffmpeg.mp4"))
    rows.append(("farm encode", f"{frames / t_enc:.1f}",
                 f"{t_enc:.2f} s, {video.stat().st_size / 1e6:.1f} MB"))
    if codec != "libx264":  # e.g. NVENC chosen: libx264 too, for comparison
        t_x = farm("encode", str(store), "--video", str(out / "farm_x264.mp4"), "--codec", "libx264")
        rows.append(("farm encode --codec libx264", f"{frames / t_x:.1f}", f"{t_x:.2f} s"))
    rows.append(("farm frames (PNG)", f"{frames / t_png:.1f}", f"{t_png:.2f} s"))
    rows.append((f"ffmpeg from PNG ({codec}, same settings)", f"{frames / t_ff:.1f}",
                 f"{t_ff:.2f} s; farm encode / ffmpeg = {t_enc / t_ff:.2f}"))

    presets = [p for p in args.presets.split(",") if p]
    trials = [("libx264", p) for p in presets]
    if presets and try_codec("h264_nvenc", w - w % 2, h - h % 2) is None:
        trials.append(("h264_nvenc", "-"))
    for c, preset in trials:
        target = out / f"q_{c}_{preset}.mp4"
        t = ffmpeg_from_pngs(pngs, spec.animation.fps, c, o.crf, preset, target)
        ssim, psnr = quality(target, pngs, spec.animation.fps)
        rows.append((f"ffmpeg {c} {preset} crf {o.crf}", f"{frames / t:.1f}",
                     f"{target.stat().st_size / 1e6:.2f} MB, SSIM {ssim:.4f}, PSNR {psnr:.2f} dB"))

    width = max(len(r[0]) for r in rows)
    print(f"{'step':<{width}}  {'frames/s':>8}  notes")
    for name, rate, note in rows:
        print(f"{name:<{width}}  {rate:>8}  {note}")


if __name__ == "__main__":
    main()
