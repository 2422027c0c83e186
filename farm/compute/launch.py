"""How a kernel is launched on a device: work-group size, groups per compute unit, and
the local-memory histogram's bins (shared by the tile renderer and frame synthesis;
a module of its own so that synthesis needs neither mpmath nor the renderer)."""

from __future__ import annotations

from dataclasses import dataclass

from farm.compute.device import DeviceInfo


@dataclass(frozen=True)
class LaunchConfig:
    """Work-group size, how many groups per compute unit a launch may use, and the
    bins of the local-memory sub-histogram.

    The global size is ``min(pixels rounded up to local_size, groups_per_unit *
    compute_units * local_size)``; each work-item takes every G-th pixel. Counts
    below ``local_bins`` are counted in local memory, the rest with global atomics.
    """

    local_size: int = 128
    groups_per_unit: int = 16
    local_bins: int = 2048

    @classmethod
    def for_device(cls, info: DeviceInfo) -> LaunchConfig:
        if info.kind == "GPU":  # the best of the sweep in BENCHMARKS.md (H200)
            return cls(local_size=256, groups_per_unit=32)
        return cls(local_size=64, groups_per_unit=4)
