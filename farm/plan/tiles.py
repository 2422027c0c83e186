"""The tile grid of a frame: tiles are the unit of work and the store's chunk.

Tiles are numbered row-major: tile ``t`` sits at column ``t % nx``, row ``t // nx``.
Tiles on the right and bottom edges are cut to the image; the store still keeps a
full ``tile_h x tile_w`` chunk for them. A tile is never larger than the image: a
tile size from the spec is cut to it (:meth:`TileGrid.fitted`; HDF5 refuses chunks
larger than a dataset's fixed dimensions). The default, ``tile = "auto"``
(:meth:`TileGrid.auto`), cuts the image into equal tiles of at most 2048x2048, so a
1920x1080 frame is one tile and a 3840x2160 frame four 1920x1080 tiles: no padding to
store or send (1024x1024 tiles would pad 1080p to 2048x2048, twice the bytes), and
few tiles, each with millions of pixels: the host's work per tile (launch, readback,
checksum, message, bookkeeping) is what limits a light job on a GPU (measured on an
H200: a 120-frame 1080p zoom whose kernels take 0.55 s spent 1.3 s on 480 tiles).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tile:
    index: int
    x0: int  # first column
    y0: int  # first row (row 0 at the top)
    width: int
    height: int

    @property
    def pixels(self) -> int:
        return self.width * self.height


@dataclass(frozen=True)
class TileGrid:
    width: int  # image W
    height: int  # image H
    tile_w: int
    tile_h: int

    @property
    def nx(self) -> int:
        return -(-self.width // self.tile_w)

    @property
    def ny(self) -> int:
        return -(-self.height // self.tile_h)

    @property
    def count(self) -> int:
        return self.nx * self.ny

    @classmethod
    def auto(cls, width: int, height: int, largest: int = 2048) -> TileGrid:
        """The fewest equal tiles of at most ``largest`` pixels a side (the last row or
        column is smaller by less than a tile's count of pixels when the image does not
        divide evenly)."""
        nx, ny = -(-width // largest), -(-height // largest)
        return cls(width, height, -(-width // nx), -(-height // ny))

    @classmethod
    def fitted(cls, width: int, height: int, tile_w: int, tile_h: int) -> TileGrid:
        """The grid of a ``width x height`` image with tiles of at most ``tile_w x tile_h``,
        cut to the image."""
        return cls(width, height, min(tile_w, width), min(tile_h, height))

    def tile(self, t: int) -> Tile:
        if not 0 <= t < self.count:
            raise IndexError(f"tile {t} of {self.count}")
        row, col = divmod(t, self.nx)
        x0, y0 = col * self.tile_w, row * self.tile_h
        return Tile(t, x0, y0, min(self.tile_w, self.width - x0), min(self.tile_h, self.height - y0))

    def __iter__(self):
        return (self.tile(t) for t in range(self.count))
