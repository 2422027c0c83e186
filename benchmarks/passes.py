"""Where the skipping loop's passes go: a Python model of kernels/perturb.cl's double loop.

    python benchmarks/passes.py                       # the Seahorse frame of benchmarks/skipping.py
    python benchmarks/passes.py --frame minibrot --pixels 100 --eps 1e-14

For random pixels of a 1080p frame (benchmarks/skipping.py's frames), runs the loop of
escape_pixel in Python on the farm's own reference and skip table (in the kernels' layout,
farm/numerics/bla.py device_layout): a pass is a step or a skip, a skip the longest valid
map from the step the pixel is at, tried from level 1 upwards; rebases and wraps as in
pixel_after. It rounds like Python's complex arithmetic, not like the kernel, so a pixel's
count may differ by a few iterations from the GPU's; the totals agree with the kernel's
own count of passes (skipping.py, "passes/px") to a few percent. No device is needed.

Prints passes and iterations per pixel, then where the single steps are: by the size of
the delta against the reference (log10 |d| / |Z|: skips need it small) and by the
reference step m (as a fraction of the period), and the skips by level.
"""

from __future__ import annotations

import argparse
import collections
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from conftest import make_spec  # noqa: E402
from skipping import FRAMES  # noqa: E402

import farm.numerics as num  # noqa: E402
from farm.compute.perturbation import perturbed_frame  # noqa: E402
from farm.numerics.bla import EPS, device_layout  # noqa: E402
from farm.numerics.highdegree import TERMS  # noqa: E402
from farm.plan import make_plan  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frame", default="seahorse", choices=sorted(FRAMES))
    ap.add_argument("--pixels", type=int, default=40, help="random pixels to follow (default 40)")
    ap.add_argument("--eps", type=float, default=EPS, help="the tables' error bound (default 2^-53)")
    ap.add_argument("--quadratic", action="store_true", help="quadratic maps only (no degree-4 maps)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--min-level", type=int, default=3,
                    help="shortest skip taken, 2^j steps (default 3: GPUs' LaunchConfig.min_skip_level)")
    args = ap.parse_args()

    center, width, max_iter = FRAMES[args.frame]
    w, h = 1920, 1080
    plan = make_plan(make_spec(size=(w, h), center=center, width=(width, width), max_iter=max_iter,
                               tile=(1024, 1024), precision="perturb"))
    refs = plan.references()
    pf = perturbed_frame(plan, refs, plan.frames[0], interior=False, eps=args.eps,
                         high_degree=not args.quadratic)
    ref = refs.refs[pf.ref]
    orbit = ref.orbit[:, 0] + 1j * ref.orbit[:, 1]
    last = len(orbit) - 1
    coef, radius = device_layout(pf.table)
    maps = coef[:, 0::2] + 1j * coef[:, 1::2]
    levels, rows = pf.table.levels, len(radius)
    r2 = num.escape_r2(plan.spec.iterations.escape_radius)
    hs = pf.h_m * 2.0**pf.h_e

    def valid(r: int, j: int, room: int, dmax: float) -> bool:
        row = r + (1 << (j - 1))
        return r % (1 << j) == 0 and row < rows and (1 << j) <= room and dmax < radius[row]

    by_ratio: collections.Counter = collections.Counter()
    by_m: collections.Counter = collections.Counter()
    skips: collections.Counter = collections.Counter()
    passes = iters = rebases = 0
    rng = np.random.default_rng(args.seed)
    for _ in range(args.pixels):
        col, row = int(rng.integers(0, w)), int(rng.integers(0, h))
        dc = complex((2 * col + 1 - w) + pf.ref_off[0], pf.ref_off[1] - (2 * row + 1 - h)) * hs
        d, m, n = 0j, 0, 0
        while n < max_iter:
            passes += 1
            dmax = max(abs(d.real), abs(d.imag))
            j = 0
            if m >= 1 and valid(m - 1, args.min_level, max_iter - n, dmax):
                j = args.min_level
                while j + 1 < levels and valid(m - 1, j + 1, max_iter - n, dmax):
                    j += 1
            if j:
                coefs = maps[(m - 1) + (1 << (j - 1))]
                d = sum(cf * d**p * dc**q for cf, (p, q) in zip(coefs, TERMS, strict=True))
                skips[j] += 1
            else:
                if m >= 1:
                    by_ratio[math.floor(math.log10(max(abs(d) / abs(orbit[m]), 1e-30)))] += 1
                by_m[min(9, int(10 * m / last))] += 1
                d = (2 * orbit[m] + d) * d + dc
            m += 1 << j
            n += 1 << j
            z = orbit[m] + d
            if abs(z) ** 2 > r2:
                break
            if m == last or abs(z) < abs(d):
                d, m = z, 0
                rebases += 1
        iters += n
    k = args.pixels
    print(f"{args.frame}: reference period {ref.period or '-'} (orbit {len(orbit)}), eps {args.eps:.3g}, "
          f"{'quadratic' if args.quadratic else 'degree-4'} maps, skips from 2^{args.min_level} steps, "
          f"{k} random pixels of 1920x1080")
    print(f"passes/px {passes / k:.0f}, iterations/px {iters / k:.0f}, single steps/px "
          f"{sum(by_m.values()) / k:.0f}, skips/px {sum(skips.values()) / k:.0f}, "
          f"rebases and wraps/px {rebases / k:.1f}")
    steps = sum(by_ratio.values())
    print("single steps by log10(|d| / |Z(m)|):  " + "  ".join(
        f"{e}: {100 * c / steps:.0f}%" for e, c in sorted(by_ratio.items()) if c >= steps / 200))
    print("single steps by m / period (tenths):  " + "  ".join(
        f"{b / 10:.1f}: {100 * c / sum(by_m.values()):.0f}%" for b, c in sorted(by_m.items())))
    print("skips by level (2^j steps):           " + "  ".join(
        f"{j}: {c / k:.0f}" for j, c in sorted(skips.items())))


if __name__ == "__main__":
    main()
