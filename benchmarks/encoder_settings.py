#!/usr/bin/env python3
"""What the encoder's settings buy: time, size and quality of presets and CRFs.

    python3 benchmarks/encoder_settings.py STORE [--first 120] [--count 120]

Colours frames ``first .. first + count - 1`` of a finished store as the farm colours
them (raw RGB in /dev/shm), encodes them once losslessly (libx264, ``-qp 0``, yuv420p:
the reference, the same chroma subsampling every setting has) and then with each
setting: libx264 presets at CRF 18, CRFs at the default preset, and libx265 where this
ffmpeg has it. Each encode is one ffmpeg process reading the raw frames; its quality is
the SSIM of its frames against the lossless encode's (ffmpeg's ssim filter, "All", in
dB). Prints a table; JSON to ``$OUT/encoder_settings.json`` when OUT is set.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SETTINGS = ([("libx264", p, 18) for p in ("ultrafast", "veryfast", "faster", "medium", "slow")]
            + [("libx264", "faster", c) for c in (14, 23, 28)]
            + [("libx265", "fast", c) for c in (18, 23)])


def colour(store: Path, first: int, count: int, out: Path) -> tuple[int, int, int]:
    """Frames first .. first + count - 1 as raw RGB in ``out``; returns (w, h, fps)."""
    from datapath import RawOutput

    from farm.color.methods import Style
    from farm.encode.sink import FrameSink
    from farm.store.reader import Store

    with Store(store) as s:
        spec, frames = s.spec, s.frames
    w, h = spec.size
    raw = RawOutput(out, w, h)
    sink = FrameSink(store, raw, Style.from_settings(spec.color), spec.color.smoothing,
                     range(first, min(frames, first + count)))
    for f in range(frames):
        sink.frame_complete(f)
    sink.finish()
    return raw.w, raw.h, spec.animation.fps


def encode(raw: Path, size: tuple[int, int], fps: int, codec_args: list[str], out: Path) -> float:
    from farm.encode.ffmpeg import ffmpeg_binary

    cmd = [ffmpeg_binary(), "-hide_banner", "-loglevel", "error", "-f", "rawvideo", "-pix_fmt", "rgb24",
           "-s", f"{size[0]}x{size[1]}", "-framerate", str(fps), "-i", str(raw), *codec_args,
           "-pix_fmt", "yuv420p", "-y", str(out)]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True)
    return time.perf_counter() - t0


def ssim_db(encoded: Path, reference: Path, fps: int) -> float:
    """SSIM of ``encoded`` against ``reference``, frame k against frame k (their
    timestamps differ: B-frame delay, MP4 and Matroska time bases)."""
    from farm.encode.ffmpeg import ffmpeg_binary

    align = f"settb=1/{fps},setpts=N"
    cmd = [ffmpeg_binary(), "-hide_banner", "-i", str(encoded), "-i", str(reference),
           "-lavfi", f"[0:v]{align}[a];[1:v]{align}[b];[a][b]ssim", "-f", "null", "-"]
    text = subprocess.run(cmd, capture_output=True, text=True, check=True).stderr
    found = re.search(r"All:\s*[\d.]+\s*\(([\d.]+|inf)\)", text)
    if not found:
        raise SystemExit(f"no SSIM in ffmpeg's output:\n{text[-1000:]}")
    return float(found.group(1))


def main() -> None:
    from farm.encode.ffmpeg import has_encoder

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("store", type=Path)
    ap.add_argument("--first", type=int, default=120)
    ap.add_argument("--count", type=int, default=120)
    args = ap.parse_args()
    shm = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path("/tmp")
    raw = shm / "encoder_settings.rgb"
    w, h, fps = colour(args.store, args.first, args.count, raw)
    frames = raw.stat().st_size // (w * h * 3)
    work = shm / "encoder_settings"
    work.mkdir(exist_ok=True)
    reference = work / "lossless.mkv"
    t_ref = encode(raw, (w, h), fps, ["-c:v", "libx264", "-preset", "ultrafast", "-qp", "0"], reference)
    rows = [{"codec": "libx264", "preset": "ultrafast", "crf": "lossless (-qp 0)", "seconds": t_ref,
             "fps": frames / t_ref, "mbit_s": reference.stat().st_size * 8 / (frames / fps) / 1e6,
             "ssim_db": float("inf")}]
    for codec, preset, crf in SETTINGS:
        if not has_encoder(codec):
            print(f"(this ffmpeg has no {codec})")
            continue
        out = work / f"{codec}-{preset}-{crf}.mp4"
        seconds = encode(raw, (w, h), fps, ["-c:v", codec, "-preset", preset, "-crf", str(crf)], out)
        rows.append({"codec": codec, "preset": preset, "crf": crf, "seconds": seconds,
                     "fps": frames / seconds, "mbit_s": out.stat().st_size * 8 / (frames / fps) / 1e6,
                     "ssim_db": ssim_db(out, reference, fps)})
        out.unlink()
    raw.unlink()
    reference.unlink()
    print(f"{frames} frames {w}x{h} at {fps} fps, frames {args.first}.. of {args.store}")
    print(f"{'codec':8} {'preset':10} {'crf':>16} {'seconds':>8} {'fps':>6} {'Mbit/s':>7} {'SSIM dB':>8}")
    for r in rows:
        print(f"{r['codec']:8} {r['preset']:10} {r['crf']!s:>16} {r['seconds']:8.2f} {r['fps']:6.1f} "
              f"{r['mbit_s']:7.1f} {r['ssim_db']:8.2f}")
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "encoder_settings.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
