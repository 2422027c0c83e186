"""Per-frame cost of a rendered store: format, iteration limit, mean count, device time.

    python benchmarks/frame_costs.py STORE [--every 5]

Device time is the sum of the frame's tiles' kernel times (tiles/seconds); "Giter/s"
is the frame's iterations (counts; max_iter where interior) over that time.
"""

from __future__ import annotations

import argparse

import h5py
import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store")
    ap.add_argument("--every", type=int, default=1, help="print every k-th frame")
    args = ap.parse_args()
    with h5py.File(args.store, "r") as f:
        seconds = f["tiles/seconds"][...].sum(axis=1)
        max_iter = f["frames/max_iter"][...]
        fmts = [p.decode() for p in f["frames/precision"][...]]
        widths = [w.decode() for w in f["frames/width"][...]]
        print(f"{'frame':>5} {'width':>12} {'format':<8} {'max_iter':>9} {'mean n':>8} "
              f"{'device ms':>10} {'Giter/s':>8}")
        for k in range(0, len(seconds), args.every):
            it = f["iterations"][k].astype(np.int64)
            work = np.where(it == 0, max_iter[k], it).sum()
            print(f"{k:>5} {float(widths[k]):>12.3g} {fmts[k]:<8} {max_iter[k]:>9} "
                  f"{it.mean():>8.1f} {1000 * seconds[k]:>10.2f} {work / seconds[k] / 1e9:>8.1f}")
        total = seconds.sum()
        print(f"total device time {total:.2f} s for {len(seconds)} frames")


if __name__ == "__main__":
    main()
