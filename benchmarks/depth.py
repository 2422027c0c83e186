"""Speed at depth: 1080p frames at 1e-10000 and 1e-100000 near Misiurewicz points that
`farm find` produces, the whole `farm render` command timed and split into reference
orbit, start-up and render (the store's timeline: farm/runtime/timeline.py).

Frames (each a one-frame job, auto iterations, the device `farm render` picks):

  10k-deep    1e-10000 at a Misiurewicz point followed down to 1e-10000 (its
              preperiod, and so its reference orbit, about the iterations the depth
              needs: tens of thousands of steps at 33k bits)
  10k         1e-10000 at a Misiurewicz point followed down to 1e-1000 only (a
              reference ten times shorter; below 1e-1000 the view is self-similar)
  100k        1e-100000 at a Misiurewicz point followed down to 1e-1000 (332k-bit
              coordinates; the same short reference)
  zoom-10k    a 600-frame zoom from width 4 to 1e-10000 at the 10k-deep point, with
              its video (issue 23: "renders end to end on one GPU")

The `farm find` runs are timed apart (they are the user's preparation, not the
render; here, on two cores: 11 s, 200 s and 180 s); jobs already in --out are
rendered as they are, so they can be made beforehand on another machine and the
renders timed alone. The stores are removed before each render (a fresh render,
reference included). Usage (from the repository root; --size 320x180 for a quick CPU
run):

    python benchmarks/depth.py [--size 1920x1080] [--only 10k,100k] [--out DIR] [--find-only]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from farm import spec as specmod  # noqa: E402

START = ("-1.7687", "0.0017")  # near the antenna's tip (fast orbits)
# name: (depth, structure followed down to, frames; a zoom of more than one frame is
# rendered with its video)
CASES = {
    "10k-deep": ("1e-10000", "1e-10000", 1),
    "10k": ("1e-10000", "1e-1000", 1),
    "100k": ("1e-100000", "1e-1000", 1),
    "zoom-10k": ("1e-10000", "1e-10000", 600),
}


def farm(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "farm", *args], capture_output=True, text=True)


def find_job(name: str, depth: str, structure: str, frames: int, size: str,
             out: Path) -> tuple[Path, float]:
    """The case's job in ``out`` (written by `farm find` unless it is there already:
    jobs made beforehand, elsewhere, are rendered as they are; 0 s of finding)."""
    job = out / f"{name}.toml"
    if job.exists():
        return job, 0.0
    start = time.perf_counter()
    args = ["find", *START, "--misiurewicz", "--depth", depth, "--frames", str(frames), "--size", size,
            "--out", str(job), "--quiet"]
    if structure != depth:
        args += ["--structure", structure]
    done = farm(*args)
    if done.returncode:
        sys.exit(f"farm find failed: {done.stderr}")
    text = job.read_text().replace(f"renders/{name}", str(out / name))
    job.write_text(text)
    return job, time.perf_counter() - start


def render(job: Path, video: bool) -> tuple[float, str]:
    """(seconds of the whole `farm render` command, its stderr)."""
    start = time.perf_counter()
    done = farm("render", str(job), *([] if video else ["--no-video"]))
    whole = time.perf_counter() - start
    if done.returncode:
        sys.exit(f"farm render failed: {done.stderr}")
    return whole, done.stderr


def phases(store: Path) -> dict:
    """The render's timeline from the store's runs table (farm/store/layout.py)."""
    import h5py

    with h5py.File(store, "r") as f:
        run = f["runs"][0]
    started, ended = float(run["process_started"]), float(run["render_ended"])
    reference = float(run["reference_s"])
    return {"reference_s": reference, "gpu_s": float(run["gpu_s"]),
            "render_s": ended - float(run["started"]),
            "startup_s": max(0.0, float(run["started"]) - started - reference)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="1920x1080")
    ap.add_argument("--only", default=",".join(CASES), help="cases, comma-separated")
    ap.add_argument("--out", help="directory for the jobs and stores (default: a temporary one)")
    ap.add_argument("--find-only", action="store_true",
                    help="write the jobs (farm find) and stop: render them later, elsewhere")
    args = ap.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="farm-depth-"))
    out.mkdir(parents=True, exist_ok=True)
    for name in args.only.split(","):
        depth, structure, frames = CASES[name]
        job, find_s = find_job(name, depth, structure, frames, args.size, out)
        if args.find_only:
            print(f"{name:9s} {job} (farm find: {find_s:.1f} s)", flush=True)
            continue
        store = Path(specmod.load(str(job)).output.store)
        store.unlink(missing_ok=True)
        whole, stderr = render(job, video=frames > 1)
        split = phases(store)
        what = f"{frames} frames with video" if frames > 1 else "one frame"
        print(f"{name:9s} {depth:>10s} (structure to {structure}), {args.size}, {what}: whole command "
              f"{whole:.2f} s = reference orbit {split['reference_s']:.2f} s + start-up "
              f"{split['startup_s']:.2f} s + render {split['render_s']:.2f} s (kernels "
              f"{split['gpu_s']:.2f} s; the rest: Python's start and the store); farm find took "
              f"{find_s:.1f} s before", flush=True)
        for line in stderr.splitlines():  # the references and the timeline, not the progress
            if line.startswith("farm:") and "warning" not in line:
                print(f"          {line}")
    print(f"jobs and stores in {out}")


if __name__ == "__main__":
    main()
