"""``farm bench``: kernel speed per number format on one device, in Giter/s.

The workload is fixed so that machines compare: a square tile of pixels inside
the main cardioid (every pixel is interior and runs the full iteration count),
rendered through the same kernels and launch path as a real render. The time is
the kernel's device time from OpenCL profiling events, the median of the repeats
after one warm-up launch (which also compiles the program).

Workloads (pixels, iterations per format); ``perturb`` is perturbation with double
deltas (view width 1e-6), ``perturb-fx`` with floatexp deltas (width 1e-400), both
against a reference orbit computed first (not timed):

==========  ===========  =======  =====  ===========  =======  ==========
workload    pixels       f64      fp128  quad-single  perturb  perturb-fx
==========  ===========  =======  =====  ===========  =======  ==========
small       256 x 256    2000     200    200          2000     500
standard    2048 x 2048  100000   10000  5000         50000    10000
==========  ===========  =======  =====  ===========  =======  ==========
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from farm import spec as specmod
from farm.compute.device import candidates
from farm.compute.launch import LaunchConfig
from farm.compute.render import TileRenderer
from farm.plan import make_plan

WORKLOADS = {
    "small": (256, {"f64": 2000, "fp128": 200, "quad-single": 200, "perturb": 2000,
                    "perturb-fx": 500}),
    "standard": (2048, {"f64": 100_000, "fp128": 10_000, "quad-single": 5000, "perturb": 50_000,
                        "perturb-fx": 10_000}),
}
WIDTH = {"perturb-fx": "1e-400"}  # everything else at 1e-6
# Iteration skipping: perturb runs with its frame's skip table, as a render would, but
# at 1e-6 no map is ever valid for its deltas, so every step pays the skip pre-check
# and none skips. At 1e-400 the all-interior workload would be skipped almost
# entirely, so perturb-fx runs without a table: both rows time the iteration itself
# (benchmarks/perturb.py measures what skipping buys on real frames).
SKIPPING = {"perturb-fx": False}


@dataclass
class BenchRow:
    device: str
    format: str
    workload: str
    pixels: int
    iterations: int
    seconds: float  # median kernel time
    giters: float  # pixels * iterations / seconds / 1e9


def bench_plan(fmt: str, side: int, iterations: int):
    """A one-tile plan whose pixels are all interior (c near -0.1 + 0.1i)."""
    width = WIDTH.get(fmt, "1e-6")
    text = f"""
[view]
center = ["-0.1", "0.1"]
width = ["{width}", "{width}"]
[image]
size = [{side}, {side}]
[animation]
frames = 1
[iterations]
max = {iterations}
[render]
precision = "{fmt.removesuffix('-fx')}"
tile = [{side}, {side}]
"""
    return make_plan(specmod.parse_text(text, name="bench"))


def bench_format(renderer_for, fmt: str, workload: str, repeats: int = 3) -> BenchRow:
    side, iters = WORKLOADS[workload]
    plan = bench_plan(fmt, side, iters[fmt])
    renderer: TileRenderer = renderer_for(plan, plan.references(), SKIPPING.get(fmt, True))
    frame, tile = plan.frames[0], plan.grid.tile(0)
    first = renderer.render(frame, tile)
    if first.iterations.any():
        raise RuntimeError(f"bench workload for {fmt} has escaping pixels; it must be all interior")
    times = [renderer.render(frame, tile).kernel_seconds for _ in range(repeats)]
    seconds = statistics.median(times)
    pixels = side * side
    return BenchRow(renderer.info.name, fmt, workload, pixels, iters[fmt], seconds,
                    pixels * iters[fmt] / seconds / 1e9)


def run_bench(selector: str, formats: list[str], workload: str | None = None,
              config: LaunchConfig | None = None) -> list[BenchRow]:
    info, device = candidates(selector)[0]
    workload = workload or ("standard" if info.kind == "GPU" else "small")
    unknown = [f for f in formats if f not in WORKLOADS[workload][1]]
    if unknown:
        raise specmod.SpecError("--formats", f"unknown format(s) {unknown}; "
                                f"allowed: {', '.join(WORKLOADS[workload][1])}")
    return [bench_format(lambda plan, ref, skip: TileRenderer(device, info, plan, config,
                                                              references=ref, skipping=skip),
                         fmt, workload) for fmt in formats]
