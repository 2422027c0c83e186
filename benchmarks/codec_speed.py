"""What the compact store's encoding costs one core, frame by frame, on a store's frames.

    python3 benchmarks/codec_speed.py STORE [--frames 12] [--levels 1,-1]

For evenly spaced frames of a finished store (not an expmap one) it reads each pixel
channel whole, then times on this thread, best of three: the byte shuffle (numpy; the
GPU's kernels/shuffle.cl does it in a render), zstd at each level on the shuffled
planes (what a packing thread does, farm/store/codec.py), the XXH3 checksum, and the
reader's decoding (zstd, then unshuffle). It prints milliseconds of CPU a frame and
the compressed size against the raw one, summed over the channels, and what the whole
store's frames would take at those rates. These are the floors the issue-21 limits in
BENCHMARKS.md are built from: work a render and a video cannot skip.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import xxhash  # noqa: E402
import zstandard  # noqa: E402

from farm.store.codec import shuffle, unshuffle  # noqa: E402
from farm.store.reader import Store  # noqa: E402


def best_cpu(fn, repeat: int = 3) -> float:
    """The least thread CPU seconds of ``repeat`` calls."""
    best = float("inf")
    for _ in range(repeat):
        t = time.thread_time()
        fn()
        best = min(best, time.thread_time() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("store", type=Path)
    ap.add_argument("--frames", type=int, default=12, help="frames measured, evenly spaced")
    ap.add_argument("--levels", default="1,-1", help="zstd levels, comma-separated")
    args = ap.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    with Store(args.store) as store:
        if store.expmap:
            raise SystemExit("codec_speed: an expmap store's units are strips, not frames")
        names = [c.name for c in store.plan().channels]
        count = store.frames
        picks = sorted({round(i * (count - 1) / max(1, args.frames - 1)) for i in range(args.frames)})
        sums: dict[str, float] = {}
        raw_bytes = 0

        def add(key: str, value: float) -> None:
            sums[key] = sums.get(key, 0.0) + value

        for f in picks:
            for got in store.read(f, names):
                arr = np.ascontiguousarray(got)
                raw_bytes += arr.nbytes
                planes = shuffle(arr)
                add("shuffle (numpy)", best_cpu(lambda a=arr: shuffle(a)))
                for level in levels:
                    comp = zstandard.ZstdCompressor(level=level, write_content_size=True)
                    data = comp.compress(planes.data)
                    add(f"zstd {level} compress", best_cpu(lambda c=comp, p=planes: c.compress(p.data)))
                    add(f"zstd {level} bytes", len(data))
                    if level == levels[0]:
                        payload = data
                add("xxh3 checksum", best_cpu(lambda p=payload: xxhash.xxh3_64_intdigest(p)))
                dec = zstandard.ZstdDecompressor()
                out = np.empty_like(arr)
                add("decode (zstd, unshuffle)", best_cpu(
                    lambda d=dec, p=payload, a=arr, o=out: unshuffle(d.decompress(p), a.dtype, a.shape, o)))
    n = len(picks)
    print(f"{args.store}: {n} of {count} frames, channels {', '.join(names)}, "
          f"{raw_bytes / n / 1e6:.1f} MB raw a frame")
    print(f"{'step':28s} {'ms a frame':>10s} {'all frames, CPU s':>18s}  size")
    for key, value in sums.items():
        if key.endswith(" bytes"):
            continue
        size = sums.get(key.replace("compress", "bytes")) if key.endswith("compress") else None
        ratio = f"{raw_bytes / size:.2f}x smaller" if size else ""
        print(f"{key:28s} {value / n * 1e3:10.2f} {value / n * count:18.2f}  {ratio}")


if __name__ == "__main__":
    main()
