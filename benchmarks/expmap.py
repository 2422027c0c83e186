"""Exponential-map zooms: pixels against frame-by-frame, and frame synthesis speed.

    python benchmarks/expmap.py counts                 # no device needed
    python benchmarks/expmap.py synth [--size 1920x1080] [--frames 90] [--device auto]
    python benchmarks/expmap.py all

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
"""

from __future__ import annotations

import argparse
import math
import time

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["counts", "synth", "all"])
    ap.add_argument("--size", default="1920x1080")
    ap.add_argument("--frames", type=int, default=90)
    ap.add_argument("--device", default="auto")
    args = ap.parse_args()
    size = tuple(int(x) for x in args.size.lower().split("x"))
    if args.what in ("counts", "all"):
        counts()
    if args.what in ("synth", "all"):
        print()
        synth((size[0], size[1]), args.frames, args.device)


if __name__ == "__main__":
    main()
