#!/usr/bin/env python3
"""The 2-core target: two versions' `farm encode` against ffmpeg from PNG files, alternated.

    python3 benchmarks/encode_png_versions.py STORE --baseline DIR [--rounds 15] [--pngs DIR]

Each round: ffmpeg alone encodes the store's frames from PNG files (``farm frames``
writes them to ``--pngs`` first, unless they are there) with the store's codec, CRF and
preset; then `farm encode STORE` of the baseline (``DIR``: a checkout's ``farm`` and
``kernels`` folders, e.g. from ``git archive REV farm kernels``) and of this checkout,
in alternating order, each through benchmarks/own_cpu.py. Prints each round, then per
version the median ratio to the round's ffmpeg, its range, how many rounds were at
most 1.3 (issue 21's target), and the median CPU of the farm itself and of ffmpeg.
Compile the baseline's bytecode first (``python3 -m compileall DIR``): a folder without
it is compiled again in every run, which costs the baseline tenths of a second.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

from encode_versions import version_paths  # noqa: E402

from farm.encode.ffmpeg import codec_args, ffmpeg_binary  # noqa: E402
from farm.store.reader import Store  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("store", type=Path)
    ap.add_argument("--baseline", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--pngs", type=Path, default=Path("/tmp/farm-encode-pngs"))
    args = ap.parse_args()
    versions = version_paths(args.baseline)
    with Store(args.store) as store:
        spec, frames = store.spec, store.frames
    if len(list(args.pngs.glob("frame_*.png"))) != frames:
        subprocess.run([sys.executable, "-m", "farm", "frames", str(args.store), "--out", str(args.pngs)],
                       check=True, cwd=ROOT)
    work = Path("/tmp/farm-encode-png-versions")
    work.mkdir(exist_ok=True)
    plain_cmd = [ffmpeg_binary(), "-hide_banner", "-loglevel", "error", "-framerate", str(spec.animation.fps),
                 "-i", str(args.pngs / "frame_%05d.png"),
                 *codec_args("libx264", spec.output.crf, spec.output.preset),
                 "-pix_fmt", "yuv420p", "-movflags", "+faststart", "-y", str(work / "plain.mp4")]
    rows: dict[str, list[tuple[float, float, float, float]]] = {name: [] for name in versions}
    for r in range(args.rounds):
        t0 = time.perf_counter()
        subprocess.run(plain_cmd, check=True)
        plain = time.perf_counter() - t0
        line = [f"round {r + 1}: ffmpeg from PNGs {plain:.3f} s"]
        for name in (list(versions) if r % 2 == 0 else list(reversed(versions))):
            video = work / f"{name}.mp4"
            video.unlink(missing_ok=True)
            done = subprocess.run([sys.executable, str(ROOT / "benchmarks/own_cpu.py"), "encode",
                                   str(args.store), "--video", str(video)], capture_output=True, text=True,
                                  env=dict(os.environ, PYTHONPATH=versions[name]))
            got = re.search(r"wall ([\d.]+) s, the farm's own CPU ([\d.]+) s, "
                            r"its children's \(ffmpeg\) ([\d.]+)", done.stderr)
            if got is None:
                raise SystemExit(f"farm encode ({name}) failed:\n{done.stderr[-2000:]}")
            wall, own, child = (float(g) for g in got.groups())
            rows[name].append((wall / plain, wall, own, child))
            line.append(f"{name} {wall:.3f} s ({wall / plain:.3f})")
        print(", ".join(line), flush=True)
    for name, got in rows.items():
        ratios = [g[0] for g in got]
        own, child = statistics.median(g[2] for g in got), statistics.median(g[3] for g in got)
        print(f"{name}: ratio {statistics.median(ratios):.3f} median ({min(ratios):.3f}-{max(ratios):.3f}), "
              f"{sum(x <= 1.3 for x in ratios)} of {len(ratios)} at most 1.3; own CPU "
              f"{own:.2f} s, ffmpeg's {child:.2f} s")


if __name__ == "__main__":
    main()
