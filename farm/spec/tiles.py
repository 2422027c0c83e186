"""A tile's size in memory: the side of a ``tile = "auto"`` tile and the bytes of one
tile's per-pixel data, which a job may not take past :data:`MAX_TILE_BYTES`.
"""

from __future__ import annotations

import math

from farm.errors import SpecError
from farm.spec.sections import JobSpec

MAX_TILE_BYTES = 1 << 30  # a tile's per-pixel data, all channels (device buffers, MPI messages)


def auto_tile_side(samples: int) -> int:
    """The longest side of a ``tile = "auto"`` tile: 2048 pixels with one sample a pixel,
    less with more samples, so that such a tile holds at most 2048^2 samples (64 MiB of
    data with the distance estimate)."""
    return max(64, int(2048 / math.sqrt(samples)))


def _tile_size(spec: JobSpec) -> tuple[int, int]:
    """The spec's tile size; for "auto", its bound (auto_tile_side)."""
    tile = spec.render.tile
    if isinstance(tile, str):
        side = auto_tile_side(spec.image.samples)
        return (side, side)
    return tile


def tile_bytes(spec: JobSpec) -> int:
    """Bytes of one full tile's per-pixel data: 8 per sample (count and offset), 8 more
    with the distance estimate (at most, for ``tile = "auto"``)."""
    tw, th = _tile_size(spec)
    w, h = spec.size
    per_sample = 16 if spec.render.distance else 8
    return min(tw, w) * min(th, h) * spec.image.samples * per_sample


def check_tile_bytes(spec: JobSpec, source: str | None) -> None:
    size = tile_bytes(spec)
    if size > MAX_TILE_BYTES:  # never for "auto" tiles (auto_tile_side)
        tw, th = _tile_size(spec)
        raise SpecError("render.tile", f"a {tw}x{th} tile with {spec.image.samples} samples per "
                        f"pixel holds {size / 2**30:.1f} GiB; at most 1 GiB: use a smaller tile",
                        source)
