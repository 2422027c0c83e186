#!/usr/bin/env python3
"""The data path and the store, measured as a user waits for it: render, store, video, plain ffmpeg.

Reproduces BENCHMARKS.md's rows on the compact store's size, the render phase and the
whole command with and without video (with plain ffmpeg on the same frames), and (with
``--codec``) the store's encoding on one core.

    python3 benchmarks/datapath.py [--jobs A.toml,B.toml] [--steps render,video,ffmpeg,encode,disk]
                                   [--baseline DIR] [--ks 1,2,4,8] [--work DIR]
    python3 benchmarks/datapath.py --codec STORE --codec-frames 24 --levels 1,-1

For each job (default: the 360-frame 1080p minibrot zoom and the heavy 1080p Seahorse
zoom), the steps asked for:

* ``render``  ``farm render --no-video`` from scratch: the whole command's seconds, its
  timeline (start-up, render phase, the kernels' device time, writer, packing), and the
  store's size: apparent (``ls``) and on disk (``du``).
* ``video``   ``farm render`` with the video: the whole command, and the video's tail
  after the last tile.
* ``base``    both of the above with the farm in ``--baseline DIR`` (a checkout of the
  version before, run from its own root), on the same machine in the same run.
* ``ffmpeg``  the best plain ffmpeg: the job's frames, coloured by the farm, as raw
  RGB in memory (/dev/shm), encoded by K ffmpeg processes at once, each a contiguous
  part, with the job's codec, CRF and preset; seconds for each K in ``--ks``.
* ``encode``  ``farm encode`` of the finished store in K segments (FARM_ENCODE_SEGMENTS)
  for each K, and with the farm's default.
* ``disk``    the store's file system writing 2 GB sequentially with direct I/O (dd).

Prints a table per job; everything goes to ``$OUT/datapath.json`` when OUT is set.

``--codec STORE``: what the compact store's encoding costs one core. For evenly spaced
frames of a finished store (not an expmap one) it reads each pixel channel whole, then
times on this thread, best of three: the byte shuffle (numpy; the GPU's
kernels/shuffle.cl does it in a render), zstd at each of ``--levels`` on the shuffled
planes (what a packing thread does, farm/store/codec.py), the XXH3 checksum, and the
reader's decoding (zstd, then unshuffle). It prints milliseconds of CPU a frame and the
compressed size against the raw one, summed over the channels, and what the whole
store's frames would take at those rates: work a render and a video cannot skip.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
JOBS = [ROOT / "benchmarks/jobs/minibrot_1080p.toml", ROOT / "benchmarks/jobs/heavy_1080p.toml"]


CPU = {"last": 0.0}  # CPU seconds (user + system) of the last command and its children


def children_cpu() -> float:
    """CPU seconds (user + system) of this process's finished children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def own_cpu() -> float:
    """CPU seconds (user + system) of this process, every thread, so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run(cmd: list[str], cwd: Path = ROOT, env: dict | None = None) -> tuple[float, str]:
    """(wall seconds, stderr) of a command that must succeed; its CPU seconds, with its
    children's (ffmpeg), go to CPU["last"]."""
    t0, c0 = time.perf_counter(), children_cpu()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env={**os.environ, **(env or {})})
    wall = time.perf_counter() - t0
    CPU["last"] = children_cpu() - c0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, cmd))} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return wall, proc.stderr


def farm(root: Path) -> list[str]:
    return [sys.executable, "-m", "farm"]


def store_status(store: Path, root: Path = ROOT) -> dict:
    out = subprocess.run([*farm(root), "status", str(store), "--json"], cwd=root, capture_output=True,
                         text=True, check=True).stdout
    return json.loads(out)


def sizes(store: Path) -> dict:
    st = store.stat()
    return {"apparent_bytes": st.st_size, "disk_bytes": st.st_blocks * 512}


def phases(run_row: dict) -> dict:
    """The timeline's phases (farm/runtime/timeline.py) from a status' run.timeline."""
    t = run_row["timeline"]
    start = t["process_started"]
    first = t["started"]
    out = {"startup_s": first - start - t.get("reference_s", 0.0), "reference_s": t.get("reference_s", 0.0),
           "render_phase_s": t["render_ended"] - first, "gpu_s": t["gpu_s"],
           "writer_busy_s": t["writer_busy"], "send_s": t.get("send_s", 0.0)}
    if t.get("video_ended", 0) > 0:
        out["video_tail_s"] = t["video_ended"] - t["render_ended"]
    for key in ("prep_s", "idle_s"):
        if key in t:
            out[key] = t[key]
    return out


def render_steps(job: Path, work: Path, root: Path, tag: str, video: bool, env: dict | None = None) -> dict:
    store, mp4 = work / f"{job.stem}-{tag}.h5", work / f"{job.stem}-{tag}.mp4"
    args = ["render", str(job), "--store", str(store), "--restart", "--quiet"]
    args += ["--video", str(mp4)] if video else ["--no-video"]
    for p in (store, mp4):
        p.unlink(missing_ok=True)
    wall, _ = run([*farm(root), *args], cwd=root, env=env)
    row = {"wall_s": wall, **sizes(store), **phases(store_status(store, root)["run"])}
    if video:
        row["video_bytes"] = mp4.stat().st_size
    return row


class RawOutput:
    """An ordered output that appends each frame's RGB bytes to a file."""

    ordered = True

    def __init__(self, path: Path, width: int, height: int):
        self.path, self.w, self.h = path, width - width % 2, height - height % 2
        self.fh = open(path, "wb")  # noqa: SIM115

    def prepare(self) -> None:
        pass

    def write(self, f: int, rgb) -> None:
        import numpy as np

        self.fh.write(np.ascontiguousarray(rgb[:self.h, :self.w]).data)

    def close(self) -> Path:
        self.fh.close()
        return self.path

    def abort(self) -> None:
        self.fh.close()


def raw_frames(store: Path, shm: Path, frames: range | None = None) -> tuple[Path, int, int, int, dict]:
    """The store's frames (default: all) coloured as the farm colours them, as one raw
    RGB file in ``shm``: (its path, the frames, width, height, the encoder's settings)."""
    from farm.color.methods import Style
    from farm.encode.sink import FrameSink
    from farm.store.reader import Store

    with Store(store) as s:
        spec, total = s.spec, s.frames
    w, h = spec.size
    out = RawOutput(shm / f"{store.stem}.rgb", w, h)
    sink = FrameSink(store, out, Style.from_settings(spec.color), spec.color.smoothing, frames)
    for f in range(total):  # every frame of a finished store is complete
        sink.frame_complete(f)
    path = sink.finish()
    return path, len(sink.order), out.w, out.h, {"crf": spec.output.crf, "preset": spec.output.preset,
                                                 "fps": spec.animation.fps}


def plain_ffmpeg(raw: Path, frames: int, w: int, h: int, settings: dict, k: int, work: Path,
                 nice: int | str = 0, wide: bool = False, pix_fmt: str = "rgb24",
                 delay: float = 0.0) -> float:
    """Seconds for k ffmpeg processes to encode k contiguous parts of the raw frames
    (``nice``: at that niceness, below what runs beside them; "idle": in Linux's
    SCHED_IDLE class, run only when nothing else wants the core; "cpusA-B": on those
    cores only, the others left to what runs beside them; ``wide``: their pipes widened
    to 1 MB, as the farm's encoders' are since 38d73dc, farm/runtime/pipes.py; ``pix_fmt``:
    the raw frames' format, ``rgb24`` or ``yuv420p``; ``delay``: seconds between starting
    the processes and their first frame, counted in the time)."""
    from farm.runtime.media import ffmpeg_binary

    size = w * h * 3 if pix_fmt == "rgb24" else w * h * 3 // 2
    cuts = [frames * i // k for i in range(k + 1)]
    procs = []
    t0, c0 = time.perf_counter(), children_cpu()
    for i in range(k):
        n = cuts[i + 1] - cuts[i]
        low = (["chrt", "-i", "0"] if nice == "idle" else
               ["taskset", "-c", str(nice)[4:]] if str(nice).startswith("cpus") else
               ["nice", "-n", str(nice)] if nice else [])
        cmd = [*low,
               ffmpeg_binary(), "-hide_banner", "-loglevel", "error", "-f", "rawvideo", "-pix_fmt", pix_fmt,
               "-s", f"{w}x{h}", "-framerate", str(settings["fps"]), "-i", "pipe:",
               "-c:v", "libx264", "-preset", settings["preset"], "-crf", str(settings["crf"]),
               "-pix_fmt", "yuv420p", "-f", "mp4", "-y", str(work / f"plain{i}.mp4")]
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE)
        if wide:
            from farm.runtime import pipes

            pipes.widen(proc.stdin)
        procs.append((proc, cuts[i] * size, n * size))
    import threading

    def feed(proc, offset, nbytes):
        time.sleep(max(0.0, t0 + delay - time.perf_counter()))
        with open(raw, "rb") as fh:
            fh.seek(offset)
            left = nbytes
            while left:
                chunk = fh.read(min(left, size * 4))
                proc.stdin.write(chunk)
                left -= len(chunk)
        proc.stdin.close()

    feeders = [threading.Thread(target=feed, args=p) for p in procs]
    for t in feeders:
        t.start()
    for t in feeders:
        t.join()
    for proc, _, _ in procs:
        if proc.wait() != 0:
            raise SystemExit("plain ffmpeg failed")
    CPU["last"] = children_cpu() - c0
    return time.perf_counter() - t0


def disk_speed(folder: Path) -> float:
    """MB/s of a 2 GB sequential write with direct I/O (dd), into ``folder``."""
    target = folder / "dd.bin"
    cmd = ["dd", "if=/dev/zero", f"of={target}", "bs=16M", "count=128", "oflag=direct", "conv=fsync"]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    mb_s = 128 * 16 * 1.048576 / (time.perf_counter() - t0)
    target.unlink()
    return mb_s


# --------------------------------------------------------------------------- --codec

def best_cpu(fn, repeat: int = 3) -> float:
    """The least thread CPU seconds of ``repeat`` calls."""
    best = float("inf")
    for _ in range(repeat):
        t = time.thread_time()
        fn()
        best = min(best, time.thread_time() - t)
    return best


def codec_speed(store_path: Path, frames: int, levels_text: str) -> None:
    """The --codec table (see the module's docstring)."""
    import numpy as np
    import xxhash
    import zstandard

    from farm.store.codec import shuffle, unshuffle
    from farm.store.reader import Store

    levels = [int(x) for x in levels_text.split(",")]
    with Store(store_path) as store:
        if store.expmap:
            raise SystemExit("datapath --codec: an expmap store's units are strips, not frames")
        names = [c.name for c in store.plan().channels]
        count = store.frames
        picks = sorted({round(i * (count - 1) / max(1, frames - 1)) for i in range(frames)})
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
    print(f"{store_path}: {n} of {count} frames, channels {', '.join(names)}, "
          f"{raw_bytes / n / 1e6:.1f} MB raw a frame")
    print(f"{'step':28s} {'ms a frame':>10s} {'all frames, CPU s':>18s}  size")
    for key, value in sums.items():
        if key.endswith(" bytes"):
            continue
        size = sums.get(key.replace("compress", "bytes")) if key.endswith("compress") else None
        ratio = f"{raw_bytes / size:.2f}x smaller" if size else ""
        print(f"{key:28s} {value / n * 1e3:10.2f} {value / n * count:18.2f}  {ratio}")


def main() -> None:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[:2]))
    ap.add_argument("--jobs", default=",".join(str(j) for j in JOBS))
    ap.add_argument("--steps", default="render,video,ffmpeg,encode,disk")
    ap.add_argument("--baseline", type=Path, help="a checkout of the version to compare with")
    ap.add_argument("--ks", default="1,2,4,8", help="processes / segments to try")
    ap.add_argument("--video-ks", default="default",
                    help="segments for the video step's renders (FARM_ENCODE_SEGMENTS), or default")
    ap.add_argument("--work", type=Path, help="folder for the stores (default: a temporary one)")
    ap.add_argument("--codec", type=Path, metavar="STORE",
                    help="the store's encoding on one core, on STORE's frames, instead")
    ap.add_argument("--codec-frames", type=int, default=12, help="with --codec: frames, evenly spaced")
    ap.add_argument("--levels", default="1,-1", help="with --codec: zstd levels, comma-separated")
    args = ap.parse_args()
    if args.codec:
        codec_speed(args.codec, args.codec_frames, args.levels)
        return
    steps = args.steps.split(",")
    ks = [int(k) for k in args.ks.split(",")]
    work = args.work or Path(tempfile.mkdtemp(prefix="farm-datapath-"))
    work.mkdir(parents=True, exist_ok=True)
    shm = Path("/dev/shm") if Path("/dev/shm").is_dir() else work
    results: dict = {"device": os.environ.get("FARM_BENCH_DEVICE", ""), "jobs": {}}
    if "disk" in steps:
        results["disk_mb_s"] = disk_speed(work)
        print(f"disk: {results['disk_mb_s']:.0f} MB/s sequential, direct I/O", flush=True)
    for job in (Path(j).resolve() for j in args.jobs.split(",")):
        row: dict = {}
        results["jobs"][job.stem] = row
        for tag, root in (("new", ROOT), ("base", args.baseline)):
            if root is None or (tag == "base" and "base" not in steps):
                continue
            if "render" in steps:
                row[f"{tag}_render"] = render_steps(job, work, root, tag, video=False)
                print(f"{job.stem} {tag} render: {json.dumps(row[f'{tag}_render'])}", flush=True)
            for k in (args.video_ks.split(",") if "video" in steps else []):
                env = {"FARM_ENCODE_SEGMENTS": k} if k != "default" and tag == "new" else {}
                name = f"{tag}_video" + ("" if k == "default" else f"_k{k}")
                if tag == "base" and k != "default":
                    continue
                row[name] = render_steps(job, work, root, tag, video=True, env=env)
                print(f"{job.stem} {name}: {json.dumps(row[name])}", flush=True)
        store = work / f"{job.stem}-new.h5"
        if "ffmpeg" in steps and store.exists():
            t0, c0 = time.perf_counter(), own_cpu()
            raw, frames, w, h, settings = raw_frames(store, shm)
            row["colour_only_s"] = time.perf_counter() - t0  # read, decode, colour: no encoder
            row["colour_only_cpu_s"] = own_cpu() - c0
            print(f"{job.stem} colouring alone into raw RGB: {row['colour_only_s']:.2f} s, "
                  f"{row['colour_only_cpu_s']:.1f} CPU s", flush=True)
            row["plain_ffmpeg_s"], row["plain_ffmpeg_cpu_s"] = {}, {}
            for k in ks:
                row["plain_ffmpeg_s"][k] = plain_ffmpeg(raw, frames, w, h, settings, k, work)
                row["plain_ffmpeg_cpu_s"][k] = CPU["last"]
            raw.unlink()
            print(f"{job.stem} plain ffmpeg ({frames} frames): {row['plain_ffmpeg_s']} "
                  f"(CPU s: {row['plain_ffmpeg_cpu_s']})", flush=True)
        if "encode" in steps and store.exists():
            row["encode_s"], row["encode_cpu_s"] = {}, {}
            for k in [0, *ks]:
                env = {"FARM_ENCODE_SEGMENTS": str(k)} if k else {}
                wall, _ = run([*farm(ROOT), "encode", str(store), "--video", str(work / "enc.mp4")], env=env)
                row["encode_s"][k or "default"] = wall
                row["encode_cpu_s"][k or "default"] = CPU["last"]
            print(f"{job.stem} farm encode: {row['encode_s']} (CPU s: {row['encode_cpu_s']})", flush=True)
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "datapath.json").write_text(json.dumps(results, indent=1))
    print(json.dumps(results, indent=1))
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
