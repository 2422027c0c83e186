"""Exponential-map zooms: pixels against frame-by-frame, frame synthesis speed, and the
same zoom rendered by both methods through the farm.

Reproduces BENCHMARKS.md's exponential-map row (pixels, total against frame by frame,
synthesis a frame) and the section "Exponential-map zooms".

    python benchmarks/expmap.py counts                 # no device needed
    python benchmarks/expmap.py synth [--size 1920x1080] [--frames 90] [--device auto]
    python benchmarks/expmap.py render [--size 1920x1080] [--doublings 12] [--width0 4]
    python benchmarks/expmap.py all                    # counts and synth

``counts``: for 1080p zooms at 30 frames per doubling (and the example jobs), the
pixels the frame-by-frame method computes (F W H) and the expmap method's (strip plus
centre image), and their ratio.

``synth``: frame synthesis of a 1080p zoom of 20 doublings on each OpenCL device the
farm would use (``--device`` as ``farm render``), from synthetic strip data (a smooth
escape-time field with 1 pixel in 20 interior; speed does not depend on the data
beyond that): per frame, the strip rows uploaded (the ring holds the window, each new
frame adds its outermost rows), one kernel launch and the readback of counts, offsets
and histogram; consecutive frames from the middle of the zoom, after 3 warm-up
frames. Also the numpy reference on two frames. Prints ms per frame and frames/s.

``render``: one zoom (Seahorse Valley, ``--width0`` down by ``--doublings`` octaves at
``--per-doubling`` frames per doubling, ``max = "auto"``) rendered with
``method = "frames"`` and with ``method = "expmap"``, each by ``farm render
--no-video`` (one process, ``--device``), then encoded by ``farm encode`` (for expmap
that includes the frame synthesis). Prints per method: rendered frames or units,
pixels computed, render wall time and kernel (device) time from the store's run
table, the encode wall time, and the ratios; then the synthesis alone (every frame
through ``Store.raw``, frames/s and the engine), and how alike the two videos' frames
are (SSIM of coloured frames, interior/exterior agreement, calm-pixel mu error) on
every 10th frame. Stores, videos and the table (``expmap_render.json``) go to
``--out`` (default: a temporary folder; ``$OUT`` when set).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from farm.plan.expmap import ExpmapGeometry, make_geometry, zoom_depths
from farm.synth import Raster, synthesize_arrays

EXAMPLES = [  # (name, W, H, frames, first width, last width)
    ("jobs/seahorse.toml", 1920, 1080, 600, 4.0, 1e-20),
    ("jobs/deep.toml-like, 1080p 4..1e-300 at 30/doubling", 1920, 1080, 30 * 998 + 1, 4.0, 1e-300),
]


def counts() -> None:
    print("pixels computed, frame-by-frame vs expmap (strip + centre image)")
    print(f"{'zoom':<52} {'frames':>7} {'frames px':>12} {'expmap px':>12} {'strip':>10} "
          f"{'centre':>9} {'ratio':>7}")
    rows: list[tuple[str, int, int, int, int]] = []
    for octaves in (4, 8, 11, 12, 16, 32, 66.4, 200):
        f = round(30 * octaves) + 1
        rows.append((f"1920x1080, {octaves} doublings, 30 frames/doubling", 1920, 1080, f, octaves))
    for name, w, h, f, w0, w1 in EXAMPLES:
        rows.append((name, w, h, f, math.log2(w0 / w1)))
    for name, w, h, f, octaves in rows:
        g = make_geometry(w, h, zoom_depths(f, octaves))
        print(f"{name:<52} {f:>7} {g.frame_pixels:>12.4g} {g.pixels:>12.4g} {g.strip_pixels:>10.3g} "
              f"{g.centre_pixels:>9.3g} {g.pixels / g.frame_pixels:>7.4f}")
    g = make_geometry(1920, 1080, zoom_depths(601, 20))
    print(f"\n1080p strip: A = {g.angles} angles, P = {g.rows_per_octave} rows per octave, centre image "
          f"{g.centre_size[0]}x{g.centre_size[1]} (2x the deepest frame); angular samples per output "
          "pixel: " + ", ".join(f"{k} {v:.2f}" for k, v in g.edge_samples().items()))


def synthetic_rows(geom: ExpmapGeometry, first: int, stop: int) -> Raster:
    """A smooth escape-time field over the strip rows first..stop-1, 5% interior."""
    g = np.arange(first, stop, dtype=np.float64)[:, None]
    a = np.arange(geom.angles, dtype=np.float64)[None, :] * (2 * math.pi / geom.angles)
    mu = 200 + 40 * np.sin(3 * a + g / 37.0) + 15 * np.cos(g / 11.0 - 5 * a) + (g / 50.0)
    n = np.floor(mu).astype(np.uint32)
    n[(np.sin(7 * a + g / 5.0) > 0.95)] = 0
    return Raster(n, (mu - np.floor(mu)).astype(np.float32), first)


def synthetic_centre(geom: ExpmapGeometry) -> Raster:
    wc, hc = geom.centre_size
    y, x = np.mgrid[0:hc, 0:wc].astype(np.float64)
    mu = 300 + 30 * np.sin(x / 17.0) * np.cos(y / 23.0)
    return Raster(np.floor(mu).astype(np.uint32), (mu - np.floor(mu)).astype(np.float32))


def synth(size: tuple[int, int], frames: int, selector: str) -> None:
    from farm.compute.device import candidates
    from farm.compute.synth import FrameSynthesizer

    w, h = size
    octaves = 20.0
    geom = make_geometry(w, h, zoom_depths(round(30 * octaves) + 1, octaves))
    centre = synthetic_centre(geom)
    max_iter = 2000
    start = geom.frames // 2
    print(f"frame synthesis, {w}x{h}, strip A={geom.angles} x {geom.rows} rows, ring "
          f"{max(b - a for a, b in map(geom.frame_rows, range(geom.frames)))} rows, "
          f"{frames} consecutive frames from frame {start}")
    print(f"{'device':<44} {'ms/frame':>9} {'frames/s':>9} {'rows up/frame':>14}")
    for info, dev in candidates(selector)[:1 if selector == "auto" else None]:
        syn = FrameSynthesizer(dev, info, geom, max_iter + 1)
        syn.set_centre(centre)

        def fetch(a: int, b: int) -> Raster:
            return synthetic_rows(geom, a, b)
        for k in range(start - 3, start):  # warm-up: build, first window upload
            syn.ensure_rows(*geom.frame_rows(k), fetch)
            syn.synthesize(k, max_iter)
        uploaded = 0
        t0 = time.perf_counter()
        for k in range(start, start + frames):
            uploaded += syn.ensure_rows(*geom.frame_rows(k), fetch)
            syn.synthesize(k, max_iter)
        dt = (time.perf_counter() - t0) / frames
        print(f"{info.name[:44]:<44} {1000 * dt:>9.2f} {1 / dt:>9.1f} {uploaded / frames:>14.1f}")
    spans = [geom.frame_rows(k) for k in (start, start + 1)]
    window = synthetic_rows(geom, min(a for a, _ in spans), max(b for _, b in spans))
    t0 = time.perf_counter()
    for k in (start, start + 1):
        synthesize_arrays(geom, k, window, centre, max_iter)
    dt = (time.perf_counter() - t0) / 2
    print(f"{'numpy reference (host, one thread)':<44} {1000 * dt:>9.2f} {1 / dt:>9.1f} {'-':>14}")


SEAHORSE = ("-0.743643887037158704752191506114774", "0.131825904205311970493132056385139")


def job_text(method: str, size: tuple[int, int], width0: str, doublings: float,
             per_doubling: int, out: Path) -> str:
    from mpmath import mp, mpf, nstr

    mp.prec = 256
    width1 = nstr(mpf(width0) / mpf(2) ** doublings, 30)
    frames = round(per_doubling * doublings) + 1
    return f"""[view]
center = ["{SEAHORSE[0]}", "{SEAHORSE[1]}"]
width = ["{width0}", "{width1}"]
[image]
size = [{size[0]}, {size[1]}]
[animation]
frames = {frames}
method = "{method}"
[iterations]
max = "auto"
[output]
store = "{out / (method + '.h5')}"
video = "{out / (method + '.mp4')}"
"""


def farm(*args: str) -> float:
    """Wall seconds of ``farm ARGS`` (which must succeed)."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "farm", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"farm {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return time.perf_counter() - t0


def render_both(size: tuple[int, int], width0: str, doublings: float, per_doubling: int,
                device: str, out: Path) -> None:
    from farm.store.reader import Store

    out.mkdir(parents=True, exist_ok=True)
    rows = {}
    for method in ("frames", "expmap"):
        job = out / f"{method}.toml"
        job.write_text(job_text(method, size, width0, doublings, per_doubling, out))
        render = farm("render", str(job), "--no-video", "--quiet", "--restart", "--device", device)
        encode = farm("encode", str(out / f"{method}.h5"), "--video", str(out / f"{method}.mp4"))
        with Store(out / f"{method}.h5") as s:
            plan = s.plan()
            run = s.file["runs"][0]
            rows[method] = {"frames": s.frames, "rendered": len(plan.frames), "pixels": plan.pixels,
                            "render_s": render, "kernel_s": float(run["gpu_s"]), "encode_s": encode}
    f, e = rows["frames"], rows["expmap"]
    print(f"same zoom, both methods: {size[0]}x{size[1]}, width {width0} down {doublings} doublings, "
          f"{per_doubling} frames per doubling ({f['frames']} frames), device {device}")
    head = (f"{'method':<8} {'rendered':>9} {'pixels':>12} {'render s':>9} {'kernel s':>9} "
            f"{'encode s':>9} {'total s':>9}")
    print(head + "\n" + "-" * len(head))
    for name, r in rows.items():
        what = f"{r['rendered']} {'units' if name == 'expmap' else 'frames'}"
        print(f"{name:<8} {what:>9} {r['pixels']:>12.4g} {r['render_s']:>9.2f} {r['kernel_s']:>9.2f} "
              f"{r['encode_s']:>9.2f} {r['render_s'] + r['encode_s']:>9.2f}")
    print(f"{'ratio':<8} {'':>9} {e['pixels'] / f['pixels']:>12.4f} {e['render_s'] / f['render_s']:>9.3f} "
          f"{e['kernel_s'] / max(f['kernel_s'], 1e-9):>9.3f} {e['encode_s'] / f['encode_s']:>9.3f} "
          f"{(e['render_s'] + e['encode_s']) / (f['render_s'] + f['encode_s']):>9.3f}")
    rows["synthesis"] = synthesis_speed(out / "expmap.h5")
    rows["quality"] = likeness(out / "frames.h5", out / "expmap.h5", device)
    (out / "expmap_render.json").write_text(json.dumps(rows, indent=2))


def synthesis_speed(store: Path) -> dict:
    """Every frame through Store.raw in order, in a fresh synthesis: frames/s."""
    from farm.compute import synthesis as engine
    from farm.store.reader import Store

    engine._SHARED.clear()
    with Store(store) as s:
        t0 = time.perf_counter()
        s.raw(0)
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        for k in range(1, s.frames):
            s.raw(k)
        rest = (time.perf_counter() - t0) / max(1, s.frames - 1)
        kind = type(s._synthesis()._engine).__name__
    print(f"synthesis ({kind}): first frame {first:.2f} s (window of strip rows), then "
          f"{1000 * rest:.1f} ms a frame ({1 / rest:.1f} frames/s), reading rows from the store included")
    return {"engine": kind, "first_s": first, "per_frame_s": rest}


def shifted_render(store, k: int, device: str) -> tuple[np.ndarray, np.ndarray]:
    """Frame k of a frames-method store rendered again with its centre moved a quarter
    pixel right and down (the yardstick: a camera offset nobody sees)."""
    import mpmath

    from farm import spec as specmod
    from farm.compute.device import candidates
    from farm.compute.render import TileRenderer
    from farm.plan import make_plan

    spec, f = store.spec, store.plan().frames[k]
    with mpmath.workprec(f.bits + 20):
        re = mpmath.nstr(mpmath.mpf(spec.view.center[0]) + f.spacing / 4, f.bits // 3)
        im = mpmath.nstr(mpmath.mpf(spec.view.center[1]) - f.spacing / 4, f.bits // 3)
        width = mpmath.nstr(f.width, f.bits // 3)
    w, h = spec.size
    text = (f'[view]\ncenter = ["{re}", "{im}"]\nwidth = "{width}"\n[image]\nsize = [{w}, {h}]\n'
            f'[animation]\nframes = 1\n[iterations]\nmax = {f.max_iter}\n[render]\n'
            f'precision = "{f.precision}"\n')
    plan = make_plan(specmod.parse_text(text))
    info, dev = candidates(device)[0]
    renderer = TileRenderer(dev, info, plan, references=plan.references())
    n, d = np.zeros((h, w), np.uint32), np.zeros((h, w), np.float32)
    for tile in plan.grid:
        res = renderer.render(plan.frames[0], tile)
        n[tile.y0:tile.y0 + tile.height, tile.x0:tile.x0 + tile.width] = res.iterations
        d[tile.y0:tile.y0 + tile.height, tile.x0:tile.x0 + tile.width] = res.fraction
    return n, d


def likeness(direct: Path, expmap: Path, device: str) -> dict:
    """SSIM of coloured frames, class agreement and calm mu error on every 10th frame;
    for three of them also the yardstick: the direct frame moved by a quarter pixel."""
    from farm.color import cdf, colorize
    from farm.store.reader import Store
    from farm.synth.quality import agreement, ssim

    def colour(n: np.ndarray, f: np.ndarray) -> np.ndarray:
        return colorize(n, f, cdf(np.bincount(n.ravel())), "classic", 3.0)

    sims, classes, p99s, medians, yard = [], [], [], [], []
    with Store(direct) as d, Store(expmap) as s:
        for k in range(0, d.frames, 10):
            raw = s.raw(k)
            n, f = d.iterations(k), d.fraction(k)
            sims.append(ssim(colour(n, f), colour(raw.iterations, raw.fraction)))
            got = agreement((n, f), (raw.iterations, raw.fraction))
            classes.append(got["class"])
            p99s.append(got["p99"])
            medians.append(got["median"])
        for k in (0, d.frames // 2, d.frames - 1):
            raw = s.raw(k)
            n, f = d.iterations(k), d.fraction(k)
            shifted = shifted_render(d, k, device)
            yard.append((k, ssim(colour(n, f), colour(raw.iterations, raw.fraction)),
                         ssim(colour(n, f), colour(*shifted)),
                         agreement((n, f), (raw.iterations, raw.fraction))["class"],
                         agreement((n, f), shifted)["class"]))
    print(f"expmap frames against frames-method frames ({len(sims)} frames): SSIM mean {np.mean(sims):.3f} "
          f"min {np.min(sims):.3f}; interior/exterior agreement mean {np.mean(classes):.4f} min "
          f"{np.min(classes):.4f}; calm-pixel mu error median {np.median(medians):.4f}, p99 worst "
          f"{np.max(p99s):.4f} counts")
    print("  against the yardstick (the direct frame moved a quarter pixel): frame, SSIM expmap / "
          "quarter-pixel, agreement expmap / quarter-pixel")
    for row in yard:
        print("    {:6d}  {:.3f} / {:.3f}  {:.4f} / {:.4f}".format(*row))
    return {"ssim_mean": float(np.mean(sims)), "ssim_min": float(np.min(sims)),
            "class_min": float(np.min(classes)), "mu_p99_max": float(np.max(p99s)), "yardstick": yard}


def main() -> None:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[:2]))
    ap.add_argument("what", choices=["counts", "synth", "render", "all"])
    ap.add_argument("--size", default="1920x1080")
    ap.add_argument("--frames", type=int, default=90, help="synth: frames timed")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--doublings", type=float, default=12.0, help="render: octaves of zoom")
    ap.add_argument("--per-doubling", type=int, default=30, help="render: frames per doubling")
    ap.add_argument("--width0", default="4", help="render: first frame's width")
    ap.add_argument("--out", help="render: folder for stores and videos")
    args = ap.parse_args()
    size = tuple(int(x) for x in args.size.lower().split("x"))
    if args.what in ("counts", "all"):
        counts()
    if args.what in ("synth", "all"):
        print()
        synth((size[0], size[1]), args.frames, args.device)
    if args.what == "render":
        out = args.out or os.environ.get("OUT") or tempfile.mkdtemp(prefix="expmap-bench-")
        render_both((size[0], size[1]), args.width0, args.doublings, args.per_doubling, args.device,
                    Path(out))


if __name__ == "__main__":
    main()
