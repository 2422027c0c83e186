"""The number formats' kernels: speed per launch configuration, and how deep each resolves.

Reproduces BENCHMARKS.md's "Kernels" rows (the rates themselves come from `farm bench`,
which runs the default configuration of the same workload) and "Precision limits".

Speed (the default): the `farm bench` workload (every pixel interior, the full iteration
count, kernel time from OpenCL profiling events, median of 3 after a warm-up), swept over
the work-group size (64, 128, 256) and the work-groups per compute unit (4, 8, 16, 32);
one row per variant, then the best per format with its ratio to the target.

    python benchmarks/kernels.py                       # GPU if there is one
    python benchmarks/kernels.py --quick --device cpu  # one config, small workload
    python benchmarks/kernels.py --ptx OUT_DIR         # also save each program's binary
                                                       # (PTX on NVIDIA) for ptxas/cuobjdump

Reach (``--limits``): for each direct format and width, a test grid rendered on one device
and compared count by count with the 200-digit mpmath reference (tests/reference.py). A
format resolves a pixel spacing when at least 99% of the grid's pixels match there and at
every shallower width scanned, on every grid; the printed limit is the smallest such
spacing (the limits behind precision = "auto", farm/plan/precision.py). The view is the
Seahorse Valley Misiurewicz point of tests/test_deep.py (filaments at every scale, every
pixel escapes): a hard view, so the limits are conservative. The column "rounded c" is
what exact arithmetic achieves on the coordinates rounded as the format holds them
(2^-96 absolute for fp128, four float32 limbs for quad-single, binary64 for f64).

    python benchmarks/kernels.py --limits                # f64, fp128, quad-single
    python benchmarks/kernels.py --limits --formats f64 --device cpu
"""

from __future__ import annotations

import argparse
import json
import sys
from fractions import Fraction
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Giter/s per H200 (perturbation: issue 7 asks for within ~2x of a plain f64 kernel, ~1900)
TARGETS = {"f64": 1500.0, "fp128": 100.0, "quad-single": 35.0, "perturb": 950.0, "perturb-fx": 950.0}


# --------------------------------------------------------------------------- speed

def save_binaries(device, out: Path) -> None:
    """Each format's program binary (NVIDIA: PTX text) and build log."""
    import pyopencl as cl

    from farm.compute import programs

    ctx = cl.Context([device])
    out.mkdir(parents=True, exist_ok=True)
    opts = programs.device_options(device, 2048)
    for fmt, src in programs.FORMAT_SOURCES.items():
        prg = programs.build(ctx, (src, "histogram.cl", "mandel.cl"), opts)
        _save_binary(prg, device, out, fmt)
    prg = programs.build(ctx, ("perturb.cl", "histogram.cl", "mandel.cl"), opts + ("-DPERTURB_FX",))
    _save_binary(prg, device, out, "perturb-fx")


def _save_binary(prg, device, out: Path, fmt: str) -> None:
    import pyopencl as cl

    (out / f"{fmt}.ptx").write_bytes(prg.get_info(cl.program_info.BINARIES)[0])
    (out / f"{fmt}.log").write_text(prg.get_build_info(device, cl.program_build_info.LOG) or "")


def sweep(args: argparse.Namespace) -> None:
    from farm.compute.bench import bench_format
    from farm.compute.device import candidates
    from farm.compute.launch import LaunchConfig
    from farm.compute.render import TileRenderer

    formats = args.formats or "f64,fp128,quad-single,perturb,perturb-fx"
    info, device = candidates(args.device)[0]
    workload = args.workload or ("standard" if info.kind == "GPU" else "small")
    print(f"device: {info.describe()}; workload {workload}")
    if args.ptx:
        save_binaries(device, args.ptx)
    base = LaunchConfig.for_device(info)
    configs = [base] if args.quick else [
        LaunchConfig(local, groups, base.local_bins)
        for local in (64, 128, 256) for groups in (4, 8, 16, 32)]
    rows = []
    print(f"{'format':<12} {'local':>5} {'groups/CU':>9} {'seconds':>9} {'Giter/s':>9} {'/target':>8}")
    for fmt in formats.split(","):
        for cfg in configs:
            row = bench_format(lambda plan, ref, skip, c=cfg: TileRenderer(device, info, plan, c,
                                                                          references=ref,
                                                                          skipping=skip),
                               fmt, workload)
            ratio = row.giters / TARGETS[fmt]
            rows.append({**row.__dict__, "local_size": cfg.local_size,
                         "groups_per_unit": cfg.groups_per_unit, "ratio_to_target": ratio})
            print(f"{fmt:<12} {cfg.local_size:>5} {cfg.groups_per_unit:>9} {row.seconds:9.4f} "
                  f"{row.giters:9.2f} {ratio:8.2f}", flush=True)
    print("\nbest per format:")
    for fmt in formats.split(","):
        best = max((r for r in rows if r["format"] == fmt), key=lambda r: r["giters"])
        print(f"  {fmt:<12} {best['giters']:9.2f} Giter/s  (local {best['local_size']}, "
              f"{best['groups_per_unit']} groups/CU; target {TARGETS[fmt]:.0f}, "
              f"ratio {best['ratio_to_target']:.2f})")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


# --------------------------------------------------------------------------- reach

MISIUREWICZ = ("-0.749525718967526899076284369547895600256399088280799332045540",
               "0.135876731345244117600571502360225831462570615468277546381148")
WIDTHS = {
    "f64": ["1e-8", "3e-9", "1e-9", "3e-10", "1e-10", "3e-11", "1e-11", "3e-12", "1e-12"],
    "fp128": ["1e-20", "3e-21", "1e-21", "3e-22", "1e-22", "3e-23", "1e-23", "3e-24", "1e-24"],
    "quad-single": ["1e-20", "1e-21", "1e-22", "1e-23", "3e-24", "1e-24", "3e-25", "1e-25", "3e-26"],
}
GRIDS = [(24, 16), (48, 32)]
MAX_ITER = 2000


def rounded_counts(fmt, width, size):
    """Exact-arithmetic counts at the coordinates rounded to the format's resolution."""
    import mpmath
    import numpy as np
    from reference import escape_count, pixel_c

    from farm.numerics.encode import qs_limbs

    def mpf(q: Fraction):
        with mpmath.workprec(600):
            return mpmath.mpf(q.numerator) / q.denominator

    w, h = size
    out = np.zeros((h, w), np.int64)
    for j in range(h):
        for i in range(w):
            re, im = pixel_c(MISIUREWICZ, width, size, i, j)
            if fmt == "f64":
                re, im = Fraction(float(re)), Fraction(float(im))
            elif fmt == "fp128":
                re, im = (Fraction(round(v * 2**96), 2**96) for v in (re, im))
            else:  # quad-single: the exact sum of the encoder's four float32 limbs
                re, im = (sum(map(Fraction, qs_limbs(mpf(v))), Fraction(0)) for v in (re, im))
            out[j, i] = escape_count(re, im, MAX_ITER)
    return out


def limits(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import make_spec, render_frame
    from reference import reference_counts

    from farm.compute.device import candidates
    from farm.plan import make_plan

    device = candidates(args.device)[0]
    print(f"device: {device[0].describe()}")
    print(f"view: Misiurewicz point {MISIUREWICZ[0][:20]}.. + {MISIUREWICZ[1][:20]}..i, "
          f"max_iter {MAX_ITER}, 99% criterion\n")
    print("| format | grid | width | spacing | match | rounded c |")
    print("|---|---|---|---|---|---|")
    found = {}
    for fmt in (args.formats or "f64,fp128,quad-single").split(","):
        holds = {grid: True for grid in GRIDS}
        limit = None
        for width in WIDTHS[fmt]:
            ok_all = True
            for grid in GRIDS:
                want = reference_counts(MISIUREWICZ, width, grid, MAX_ITER)
                plan = make_plan(make_spec(size=grid, center=MISIUREWICZ, width=(width, width),
                                           max_iter=MAX_ITER, tile=(16, 16)),
                                 stored=[(MAX_ITER, fmt)])
                got, _ = render_frame(device, plan)
                match = float((got == want).mean())
                best = float((rounded_counts(fmt, width, grid) == want).mean())
                spacing = float(width) / grid[0]
                print(f"| {fmt} | {grid[0]}x{grid[1]} | {width} | {spacing:.1e} | {match:.4f} "
                      f"| {best:.4f} |", flush=True)
                holds[grid] = holds[grid] and match >= 0.99
                ok_all = ok_all and holds[grid]
            if ok_all:
                limit = max(float(width) / g[0] for g in GRIDS)
        found[fmt] = limit
    print()
    for fmt, limit in found.items():
        text = f"{limit:.1e}" if limit else "not reached in the scanned widths"
        print(f"{fmt}: resolves pixel spacings down to {text}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] + " " + __doc__.split("\n\n")[1],
                                 epilog="BENCHMARKS.md: the table's kernel rows; sections "
                                        "\"Kernels\" and \"Precision limits\".")
    ap.add_argument("--device", default="auto", help="auto | gpu | cpu (default: %(default)s)")
    ap.add_argument("--formats", help="comma-separated (default: every format; with --limits "
                                      "f64,fp128,quad-single)")
    ap.add_argument("--quick", action="store_true", help="the default launch configuration only")
    ap.add_argument("--workload", choices=("small", "standard"),
                    help="default: standard on GPUs (farm bench's), small elsewhere")
    ap.add_argument("--ptx", type=Path, help="folder for program binaries")
    ap.add_argument("--json", type=Path, help="write the rows here")
    ap.add_argument("--limits", action="store_true",
                    help="the deepest pixel spacing each direct format resolves, instead of speed")
    args = ap.parse_args()
    if args.limits:
        limits(args)
    else:
        sweep(args)


if __name__ == "__main__":
    main()
