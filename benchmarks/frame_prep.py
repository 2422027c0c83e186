"""Per-frame host preparation (FramePrep: reference offset and skip table) of a job,
alone and inside `farm render`, with quadratic and degree-4 skip tables.

    python benchmarks/frame_prep.py benchmarks/jobs/seahorse_zoom_1080p.toml           # alone
    python benchmarks/frame_prep.py benchmarks/jobs/seahorse_zoom_1080p.toml --render  # in the job

Alone: every frame prepared in turn on one thread. In the job: `farm render JOB
--no-video --restart` in this process, with the time each preparation took on its
thread summed (beside the kernels, the worker loop and the store writer, which share
the interpreter's lock); FARM_SKIP_DEGREE=2 or 3 picks the tables, FARM_PREP_PROCESSES=0
puts the preparation on a thread (GPUs' default: a helper process, whose time is not
seen here; farm/compute/prep.py)."""

from __future__ import annotations

import argparse
import os
import time

from farm.compute.prep import FrameBuilder, FramePrep
from farm.plan import make_plan
from farm.spec import load


def alone(job: str) -> None:
    plan = make_plan(load(job))
    t = time.perf_counter()
    refs = plan.references()
    print(f"references {time.perf_counter() - t:.2f} s, periods {sorted({r.period for r in refs.refs})}")
    for high in (False, True):
        prep = FramePrep(plan, refs, high_degree=high)
        t = time.perf_counter()
        for frame in plan.frames:
            prep.prepare(frame).result()
        dt = time.perf_counter() - t
        print(f"{'degree-4 ' if high else 'quadratic'} tables: {dt:.3f} s for "
              f"{len(plan.frames)} frames, {dt / len(plan.frames) * 1e3:.1f} ms a frame")


def in_render(job: str) -> None:
    from farm import cli

    spent: list[float] = []
    build = FrameBuilder.build

    def timed(self, frame):
        t = time.perf_counter()
        try:
            return build(self, frame)
        finally:
            spent.append(time.perf_counter() - t)

    FrameBuilder.build = timed  # type: ignore[method-assign]
    cli.main(["render", job, "--no-video", "--restart"])
    knobs = " ".join(f"{k}={os.environ.get(k, '')}" for k in ("FARM_SKIP_DEGREE", "FARM_PREP_PROCESSES"))
    if spent:
        print(f"{knobs}: {len(spent)} preparations, {sum(spent):.3f} s on their thread, "
              f"{sum(spent) / len(spent) * 1e3:.1f} ms each")
    else:
        print(f"{knobs}: frames prepared in helper processes (not timed here)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("job")
    ap.add_argument("--render", action="store_true", help="inside `farm render` (see above)")
    ap.add_argument("--switch", type=float, help="the interpreter's thread switch interval, s "
                    "(sys.setswitchinterval; Python's default 0.005)")
    args = ap.parse_args()
    if args.switch:
        import sys
        sys.setswitchinterval(args.switch)
    (in_render if args.render else alone)(args.job)


if __name__ == "__main__":
    main()
