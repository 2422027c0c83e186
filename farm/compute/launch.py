"""How a kernel is launched on a device: work-group size, groups per compute unit, and
the local-memory histogram's bins (shared by the tile renderer and frame synthesis;
a module of its own so that synthesis needs neither mpmath nor the renderer)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from farm.compute.inventory import DeviceInfo
from farm.runtime.cores import usable_cores


@dataclass(frozen=True)
class LaunchConfig:
    """Work-group size, how many groups per compute unit a launch may use, and the
    bins of the local-memory sub-histogram.

    The global size (:meth:`global_size`) is ``min(work-items rounded up to
    local_size, groups_per_unit * compute_units * local_size)``; each work-item takes
    every G-th pixel. Counts
    below ``local_bins`` are counted in local memory, the rest with global atomics.

    Perturbation: ``lanes`` > 1 keeps that many pixels in flight per work-item with
    double deltas (kernels/perturb_lanes.cl: SIMD on CPUs; the global size then counts
    pixels / lanes), and skips are at least ``2**min_skip_level`` steps (a lane that
    skips costs a pass through scalar code: short skips do not pay). CPUs: 8 lanes,
    skips of 32 steps or more (measured on PoCL, BENCHMARKS.md); GPUs: one pixel per
    work-item, skips of 8 or more (a pixel that skips makes the others of its warp wait
    through the map: on an H200 the 1080p Seahorse frame ran at 1152, 1300, 1380, 1348
    and 1218 Giter/s with skips from 2, 4, 8, 16 and 32 steps; the minibrot frame at
    3869, 4482, 4689, 4883 and 4968). FARM_PERTURB_LANES (CPUs) and FARM_MIN_SKIP_LEVEL
    (either device) override these choices (developer knobs).

    ``interior``: the interior test of perturbed pixels (kernels/perturb.cl: stop a
    pixel its wraps show attracted to the nucleus' cycle). On CPUs it stays on. On
    GPUs it is compiled out (-DPERTURB_NO_INTERIOR): its state, four doubles a pixel,
    cost more than the early stops saved; measured on an H200 (benchmarks/skipping.py,
    1080p): with it, Seahorse 557.8 Giter/s and the minibrot frame 1882.5; without it
    714.6 and 2600.6 (and the same counts: every interior pixel still ends with count
    0 at max_iter).

    ``high_degree``: skip tables of nucleus references with maps of degree 4
    (farm/numerics/highdegree.py), on every device (BENCHMARKS.md: on an H200 maps of
    degree 3 cut the kernel time of the 1080p Seahorse frame from 25.4 to 15.5 ms).
    FARM_SKIP_DEGREE=2 keeps the tables quadratic (a developer knob).

    ``pixel_blocks``: a warp's 32 work-items take a block of 8 x 4 pixels of the tile
    rather than 32 pixels of one row (kernels/mandel.cl, -DPIXEL_BLOCKS): their costs
    differ less, and a warp waits for its slowest pixel. GPUs only (a CPU's work-items
    run one after another, or 8 at a time in vectors along a row); on an H200 the
    1080p Seahorse frame ran at 2190-2215 Giter/s with blocks and 2021-2045 without
    (BENCHMARKS.md, "Pixel blocks"). FARM_PIXEL_BLOCKS=0 turns them off (a developer
    knob).

    ``prep_processes``: frames are prepared (farm/compute/prep.py) in that many helper
    processes, or on a thread when 0. GPUs: a quarter of the cores this process may
    use, at least 2 (on a thread, the GPU waited for the tables, and one helper builds a
    table in about the time an H200 renders the 1080p frame: BENCHMARKS.md, "The whole
    job on the GPU"; two held a fast 360-frame 1080p zoom back on an H100), at most the
    cores less one (a small Slurm allocation: the renderer keeps a core); CPUs: 0
    (the kernel has the cores). FARM_PREP_PROCESSES overrides either choice (a
    developer knob).
    """

    local_size: int = 128
    groups_per_unit: int = 16
    local_bins: int = 2048
    lanes: int = 1
    min_skip_level: int = 1
    interior: bool = True
    high_degree: bool = True
    prep_processes: int = 0
    pixel_blocks: bool = False

    def global_size(self, work_items: int, compute_units: int) -> int:
        """The global size of a launch that has ``work_items`` to do (see above)."""
        local = self.local_size
        return min(-(-work_items // local) * local, self.groups_per_unit * compute_units * local)

    @classmethod
    def for_device(cls, info: DeviceInfo) -> LaunchConfig:
        high = os.environ.get("FARM_SKIP_DEGREE", "") != "2"
        helpers = os.environ.get("FARM_PREP_PROCESSES", "")
        level = os.environ.get("FARM_MIN_SKIP_LEVEL", "")
        groups = os.environ.get("FARM_GROUPS_PER_UNIT", "")
        if info.kind == "GPU":  # the best of the sweep in BENCHMARKS.md (H200)
            cores = usable_cores()
            return cls(local_size=256, groups_per_unit=int(groups or 32),
                       min_skip_level=int(level or 3),
                       interior=False, high_degree=high,
                       prep_processes=int(helpers or min(max(2, cores // 4), cores - 1)),
                       pixel_blocks=os.environ.get("FARM_PIXEL_BLOCKS", "") != "0")
        lanes = int(os.environ.get("FARM_PERTURB_LANES", "") or 8)
        return cls(local_size=64, groups_per_unit=int(groups or 4), lanes=lanes,
                   min_skip_level=int(level or 5),
                   high_degree=high, prep_processes=int(helpers or 0))
