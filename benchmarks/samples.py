"""Anti-aliasing and the distance estimate: what they cost, and what samples buy.

Reproduces BENCHMARKS.md's row on 4 samples a pixel (kernel time, perturbed views) and
the section "Anti-aliasing and the distance estimate".

Sections (all by default; renders in-process on the first device, f64 unless noted):

* cost: kernel device time of one side x side tile with samples 1 and 4, distance off
  and on, in f64 (Seahorse Valley at width 1e-4) and fp128 and quad-single (a Seahorse
  Valley Misiurewicz point at 1e-18): the price of the derivative in each format.
* quality: the error of a still against a many-samples reference, for 1, 3, 4, 9 and 16
  samples per pixel, at four views (the whole set, Seahorse Valley at two depths, a
  dendrite at c = i).
  The reference is the same view rendered at 8x the width and height with one sample
  per pixel, i.e. an 8x8 grid of samples (stratum midpoints) in every output pixel,
  independent of the sample pattern. Colours: farm.color.colorize (palette classic, 3
  cycles) of every sample, averaged in 8-bit units; one CDF for all (the reference's
  histogram), so the error is the sampling's alone. Error: RMS over pixels and RGB
  channels, in 8-bit units.
* zoom: a zoom of F frames (Seahorse Valley, width 1e-3 down by 2x per second at 30
  fps) with 1, 4 and 16 samples, and the 8x8 reference: shimmer, the RMS of the second
  difference in time of the 8-bit frames, F(f+1) - 2 F(f) + F(f-1) (a smooth zoom
  changes colours smoothly; aliased detail sparkles from frame to frame), and the H.264
  bitrate at CRF 18 (libx264, yuv420p, 30 fps) of the same frames. Colours as the farm
  makes them: each render's own histograms, smoothed over +-4 frames.

With ``--perturbed`` the cost and quality sections take perturbed frames instead
(kernels/perturb.cl; the first device's default launch, so on a CPU the lanes kernel
with skips of 32 steps or more): cost at a Seahorse Valley Misiurewicz point at 1e-30
(double deltas, short orbits), next to the period-8007 minibrot at 1e-22 (skips of
thousands of steps) and at c = i at 1e-320 (floatexp deltas); quality at the
Misiurewicz point at 1e-30, the minibrot view and c = i at 1e-100. The kernel time per
sample and the ratio of the derivative's to the plain kernel's are the figures to read.

    python benchmarks/samples.py [--device gpu] [--side 1024] [--size 640x360]
                                 [--frames 48] [--sections cost quality zoom]
                                 [--perturbed]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from conftest import make_spec, render_channels  # noqa: E402

from farm.color import cdf, colorize, smoothed_cdfs  # noqa: E402
from farm.compute.device import candidates  # noqa: E402
from farm.compute.render import TileRenderer  # noqa: E402
from farm.plan import make_plan  # noqa: E402
from farm.runtime.media import ffmpeg_binary  # noqa: E402

CLASSIC = ("-0.743643887037158704752191506114774", "0.131825904205311970493132056385139")
MISIUREWICZ = ("-0.749525718967526899076284369547895600256399088280799332045540",
               "0.135876731345244117600571502360225831462570615468277546381148")
VIEWS = [("whole set", ("-0.75", "0"), "3.2", 500),
         ("seahorse 1e-2", CLASSIC, "1e-2", 3000),
         ("seahorse 1e-4", CLASSIC, "1e-4", 3000),
         ("dendrite c=i 1e-3", ("0", "1"), "1e-3", 3000)]
PALETTE, CYCLES = "classic", 3.0
PERTURBED_COST = [("perturb", MISIUREWICZ, "1e-30", 3000), ("perturb", CLASSIC, "1e-22", 50000),
                  ("perturb", ("0", "1"), "1e-320", 3000)]
PERTURBED_VIEWS = [("seahorse misiurewicz 1e-30", MISIUREWICZ, "1e-30", 3000),
                   ("seahorse minibrot 1e-22", CLASSIC, "1e-22", 20000),
                   ("dendrite c=i 1e-100", ("0", "1"), "1e-100", 3000)]
_refs: dict = {}


def references(plan):
    """The plan's reference orbits (perturbed frames), computed once per view."""
    if not plan.perturbed:
        return None
    key = (plan.spec.view, plan.frames[0].max_iter)
    if key not in _refs:
        _refs[key] = plan.references()
    return _refs[key]


def plan_for(center, width, size, max_iter, fmt="f64", samples=1, distance=False, frames=1,
             tile=256):
    widths = width if isinstance(width, tuple) else (width, width)
    spec = make_spec(size=size, center=center, width=widths, max_iter=max_iter,
                     tile=(min(tile, size[0]), min(tile, size[1])), samples=samples,
                     distance=distance, frames=frames)
    return make_plan(spec, stored=[(max_iter, fmt)] * frames)


def stacked(out: dict, name: str) -> np.ndarray:
    """(H, W, S) of a channel, sample 0 first."""
    if "samples/" + name not in out:
        return out[name][..., None]
    return np.concatenate([out[name][..., None], out["samples/" + name]], axis=2)


def colour(out: dict, frame_cdf: np.ndarray) -> np.ndarray:
    """Mean colour (H, W, 3) float64 of every sample, in 8-bit units."""
    it, fr = stacked(out, "iterations"), stacked(out, "fraction")
    acc = np.zeros(it.shape[:2] + (3,))
    for s in range(it.shape[2]):
        acc += colorize(it[..., s], fr[..., s], frame_cdf, PALETTE, CYCLES)
    return acc / it.shape[2]


def block_mean(rgb: np.ndarray, k: int) -> np.ndarray:
    h, w = rgb.shape[0] // k, rgb.shape[1] // k
    return rgb.reshape(h, k, w, k, 3).mean(axis=(1, 3))


# ----------------------------------------------------------------------------- cost


def kernel_seconds(device, plans, rounds=5) -> list[float]:
    """The least kernel time of each plan's first tile over ``rounds`` rounds, the plans
    taking turns in each round (a machine whose load drifts slows them alike)."""
    info, dev = device
    renderers = [TileRenderer(dev, info, plan, references=references(plan)) for plan in plans]
    jobs = [(r, p.frames[0], p.grid.tile(0)) for r, p in zip(renderers, plans, strict=True)]
    for r, frame, tile in jobs:
        r.render(frame, tile)  # warm-up: builds the program
    best = [float("inf")] * len(jobs)
    for _ in range(rounds):
        for k, (r, frame, tile) in enumerate(jobs):
            best[k] = min(best[k], r.render(frame, tile).kernel_seconds)
    return best


def cost(device, side: int, perturbed: bool = False) -> None:
    print(f"## cost: kernel time of one {side}x{side} tile, seconds (ratio to samples 1, "
          "distance off)\n")
    print("| format | view | samples 1 | +distance | samples 4 | samples 4 +distance |")
    print("|---|---|---|---|---|---|")
    rows = [("f64", CLASSIC, "1e-4", 3000), ("fp128", MISIUREWICZ, "1e-18", 2000),
            ("quad-single", MISIUREWICZ, "1e-18", 2000)]
    for fmt, center, width, max_iter in PERTURBED_COST if perturbed else rows:
        times = kernel_seconds(device, [plan_for(center, width, (side, side), max_iter, fmt, n, d,
                                                 tile=side)
                                        for n, d in ((1, False), (1, True), (4, False), (4, True))])
        cells = [f"{t:.4f} ({t / times[0]:.2f}x)" for t in times]
        print(f"| {fmt} | {width} | " + " | ".join(cells) + " |", flush=True)
    print()


# ----------------------------------------------------------------------------- quality


def quality(device, size: tuple[int, int], counts=(1, 3, 4, 9, 16), k=8,
            perturbed: bool = False) -> None:
    w, h = size
    fmt = "perturb" if perturbed else "f64"
    print(f"## quality: RMS error against an {k}x{k}-grid reference, 8-bit units, {w}x{h}, "
          f"{fmt}\n")
    print("| view | " + " | ".join(f"{n} sample{'s' * (n > 1)}" for n in counts)
          + " | 1 -> 4 |")
    print("|---|" + "---|" * (len(counts) + 1))
    for name, center, width, max_iter in PERTURBED_VIEWS if perturbed else VIEWS:
        big = plan_for(center, width, (w * k, h * k), max_iter, fmt)
        ref_out, ref_hist = render_channels(device, big, references=references(big))
        ref_cdf = cdf(ref_hist)
        ref = block_mean(colour(ref_out, ref_cdf), k)
        errors = {}
        for n in counts:
            plan = plan_for(center, width, size, max_iter, fmt, samples=n)
            out, _ = render_channels(device, plan, references=references(plan))
            errors[n] = float(np.sqrt(np.mean((colour(out, ref_cdf) - ref) ** 2)))
        ratio = errors[1] / errors[4] if 1 in errors and 4 in errors else float("nan")
        print(f"| {name} | " + " | ".join(f"{errors[n]:.2f}" for n in counts)
              + f" | {ratio:.2f}x |", flush=True)
    print()


# ----------------------------------------------------------------------------- zoom


def zoom_frames(device, size, frames, samples, k=1) -> list[np.ndarray]:
    """8-bit RGB frames of the zoom, as the farm colours them (own histograms, smoothed
    over +-4 frames); k > 1: rendered k times wider and higher, block-averaged."""
    w, h = size
    last = f"{1e-3 * 2 ** (-(frames - 1) / 30):.6e}"
    plan = plan_for(CLASSIC, ("1e-3", last), (w * k, h * k), 3000, samples=samples,
                    frames=frames)
    outs, hists = [], []
    for f in range(frames):
        out, hist = render_channels(device, plan, frame=f)
        outs.append(out)
        hists.append(hist)
    rgbs = []
    for out, frame_cdf in zip(outs, smoothed_cdfs(lambda f: hists[f], frames, 4), strict=True):
        rgb = colour(out, frame_cdf)
        rgbs.append(np.rint(block_mean(rgb, k) if k > 1 else rgb).astype(np.uint8))
    return rgbs


def shimmer(rgbs: list[np.ndarray]) -> float:
    a = np.stack(rgbs).astype(np.float64)
    return float(np.sqrt(np.mean((a[2:] - 2 * a[1:-1] + a[:-2]) ** 2)))


def bitrate(rgbs: list[np.ndarray], fps=30, crf=18) -> float:
    """kbit/s of the frames as H.264 (libx264, yuv420p, CRF crf)."""
    h, w = rgbs[0].shape[:2]
    ew, eh = w - w % 2, h - h % 2
    with tempfile.TemporaryDirectory() as tmp:
        video = Path(tmp) / "v.mp4"
        cmd = [ffmpeg_binary(), "-hide_banner", "-loglevel", "error", "-f", "rawvideo",
               "-pix_fmt", "rgb24", "-s", f"{ew}x{eh}", "-r", str(fps), "-i", "pipe:",
               "-c:v", "libx264", "-pix_fmt", "yuv420p", "-crf", str(crf), str(video)]
        data = b"".join(np.ascontiguousarray(x[:eh, :ew]).tobytes() for x in rgbs)
        subprocess.run(cmd, input=data, check=True)
        return video.stat().st_size * 8 / (len(rgbs) / fps) / 1000


def zoom(device, size, frames, counts=(1, 4, 16)) -> None:
    w, h = size
    print(f"## zoom: {frames} frames of {w}x{h}, Seahorse Valley from width 1e-3, "
          "2x per second at 30 fps\n")
    print("| samples | shimmer (8-bit RMS) | H.264 CRF 18 (kbit/s) |")
    print("|---|---|---|")
    for n in (*counts, "8x8 grid"):
        rgbs = (zoom_frames(device, size, frames, 1, k=8) if n == "8x8 grid"
                else zoom_frames(device, size, frames, int(n)))
        print(f"| {n} | {shimmer(rgbs):.2f} | {bitrate(rgbs):.0f} |", flush=True)
    print()


def main() -> None:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[:2]))
    ap.add_argument("--device", default="auto")
    ap.add_argument("--side", type=int, default=256, help="tile side for the cost section")
    ap.add_argument("--size", default="160x90", help="WxH of the quality and zoom images")
    ap.add_argument("--frames", type=int, default=48)
    ap.add_argument("--sections", nargs="+", default=["cost", "quality", "zoom"],
                    choices=["cost", "quality", "zoom"])
    ap.add_argument("--perturbed", action="store_true",
                    help="cost and quality of perturbed frames (deep zooms)")
    args = ap.parse_args()
    size = tuple(int(x) for x in args.size.split("x"))
    device = candidates(args.device)[0]
    print(f"device: {device[0].describe()}\n")
    t0 = time.time()
    if "cost" in args.sections:
        cost(device, args.side, args.perturbed)
    if "quality" in args.sections:
        quality(device, size, perturbed=args.perturbed)  # type: ignore[arg-type]
    if "zoom" in args.sections:
        zoom(device, size, args.frames)
    print(f"({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
