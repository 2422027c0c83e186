"""Where each tile's chunk lies in the store's file, and reading chunks back fast.

The pixel channels are chunked by tile, and every chunk is a slot at a fixed offset
(farm/store/layout.py, farm/store/codec.py), so both the writer and the readers find a
tile by its offset in HDF5's chunk index, read once per store and process, and then
use plain ``pread`` without the HDF5 library: readers decode tiles on several threads
at once (zstd and numpy release the interpreter lock), and need no HDF5 filter
plugin. A compacted store (farm/store/compact.py) keeps each chunk as just its stored
bytes, packed end to end: read the same way, never written. A store whose chunks are
neither (repacked by h5repack, say) is read through h5py instead (:meth:`Chunks.open`
returns None).
"""

from __future__ import annotations

import concurrent.futures
import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass

import h5py
import numpy as np

from farm.errors import StoreError
from farm.plan import Channel, Tile, TileGrid
from farm.runtime.cores import usable_cores
from farm.store.codec import Codec


def _pipeline(dset: h5py.Dataset) -> list[tuple[int, tuple[int, ...]]]:
    """The dataset's filter pipeline: (filter id, client values) in order."""
    dcpl = dset.id.get_create_plist()
    return [(f[0], tuple(f[2])) for f in (dcpl.get_filter(i) for i in range(dcpl.get_nfilters()))]


def channel_codec(dset: h5py.Dataset) -> Codec | None:
    """How ``dset``'s chunks are encoded, or None when the farm cannot write them (a
    store repacked with other filters)."""
    return Codec.of(_pipeline(dset))


def compacted(f: h5py.File) -> bool:
    """Whether the store ``f`` was compacted (farm/store/compact.py): its chunks packed
    end to end, its histogram chunked (a render's store keeps it contiguous)."""
    return "histogram" in f and f["histogram"].chunks is not None


def chunk_slots(dset: h5py.Dataset, grid: TileGrid, lengths: np.ndarray | None = None) -> np.ndarray:
    """Byte offset of each tile's chunk slot, shape (F, T). Raises StoreError unless
    every chunk is a slot of the size this farm writes in place, or, in a compacted
    compressed store, exactly its stored length (``lengths``, (F, T): this channel's
    ``tiles/bytes``); a store repacked or re-chunked can be read, not resumed."""
    th, tw = grid.tile_h, grid.tile_w
    out = np.full((dset.shape[0], grid.count), -1, dtype=np.int64)
    codec = channel_codec(dset)
    raw = th * tw * int(np.prod(dset.shape[3:])) * dset.dtype.itemsize
    if codec is None or dset.chunks != (1, th, tw, *dset.shape[3:]):
        raise StoreError(f"{dset.file.filename}: {dset.name} is compressed or re-chunked "
                         "(repacked?); it can be read, not resumed")
    full = codec.slot_bytes(raw)

    def note(info) -> None:
        f, y, x = info.chunk_offset[:3]
        t = (y // th) * grid.nx + x // tw
        want = full if lengths is None else int(lengths[f, t])
        if info.size != want or info.filter_mask:
            raise StoreError(f"{dset.file.filename}: {dset.name} has a chunk of {info.size} "
                             f"bytes, not {want}; it can be read, not resumed")
        out[f, t] = info.byte_offset

    if hasattr(dset.id, "chunk_iter"):
        dset.id.chunk_iter(note)
    else:
        for i in range(dset.id.get_num_chunks()):
            note(dset.id.get_chunk_info(i))
    if (out < 0).any():
        raise RuntimeError(f"{dset.name}: some chunks are not allocated")
    return out


@functools.cache
def decode_pool() -> concurrent.futures.ThreadPoolExecutor:
    """The process's threads for decoding tiles (one per core this process may use)."""
    return concurrent.futures.ThreadPoolExecutor(usable_cores(), thread_name_prefix="farm-decode")


@dataclass(frozen=True)
class Chunks:
    """The chunk slots of a store's pixel channels: offsets (F, T) per channel, the
    codec, and each channel's slot size; ``packed``: a compacted store's chunks, just
    their stored bytes end to end (read, never written)."""

    channels: tuple[Channel, ...]
    grid: TileGrid
    codec: Codec
    slots: dict[str, np.ndarray]  # channel name -> (F, T) byte offsets
    slot_bytes: dict[str, int]
    packed: bool = False

    @classmethod
    def open(cls, f: h5py.File, channels: Sequence[Channel], grid: TileGrid) -> Chunks | None:
        """The slots of the open store ``f`` (None: not written in place, read via h5py)."""
        codec = channel_codec(f[channels[0].name])
        if codec is None or (codec.compressed and "tiles/bytes" not in f):
            return None
        compact = compacted(f)
        lengths = f["tiles/bytes"][...] if compact and codec.compressed else None
        try:
            slots = {c.name: chunk_slots(f[c.name], grid, None if lengths is None else lengths[..., k])
                     for k, c in enumerate(channels)}
        except StoreError:
            return None
        raw = {c.name: c.nbytes(grid.tile_w * grid.tile_h) for c in channels}
        return cls(tuple(channels), grid, codec, slots, {k: codec.slot_bytes(v) for k, v in raw.items()},
                   compact)

    def stored_length(self, k: int, lengths: Sequence[int] | np.ndarray | None) -> int:
        """Bytes stored for channel ``k`` of a tile whose ``tiles/bytes`` are ``lengths``
        (compressed stores; 0: never written), or the raw chunk's size."""
        if self.codec.compressed and lengths is not None:
            return int(lengths[k])
        return self.channels[k].nbytes(self.grid.tile_h * self.grid.tile_w)

    def tile_chunks(self, fd: int, frame: int, tile: int, lengths: Sequence[int] | np.ndarray | None,
                    which: Sequence[int] | None = None, into: np.ndarray | None = None) -> list[np.ndarray]:
        """Channels ``which`` (indices, default all) of a tile as full chunks (zeros
        beyond the image at edge tiles), read from the open file ``fd``; ``lengths`` are
        the tile's ``tiles/bytes`` (compressed stores). ``into``: where the one channel
        asked for goes (C-contiguous, the chunk's shape)."""
        out = []
        th, tw = self.grid.tile_h, self.grid.tile_w
        for k in range(len(self.channels)) if which is None else which:
            c = self.channels[k]
            data = self.stored(fd, frame, tile, lengths, k)
            if data is None:  # never written (compressed stores): the slot's empty chunk, zeros
                chunk = np.zeros(c.shape(th, tw), c.dtype) if into is None else into
                chunk[...] = 0
                out.append(chunk)
                continue
            out.append(self.codec.decode(data, c.dtype, c.shape(th, tw), into))
        return out

    def tile_planes(self, fd: int, frame: int, tile: int, lengths: Sequence[int] | np.ndarray | None,
                    k: int) -> np.ndarray:
        """Channel ``k`` of a tile of a compressed store as its byte planes (uint8, the
        chunk's bytes shuffled as stored: :func:`farm.store.codec.shuffle`), zstd undone,
        the shuffle not: for a reader that unshuffles on the device."""
        size = self.channels[k].nbytes(self.grid.tile_h * self.grid.tile_w)
        data = self.stored(fd, frame, tile, lengths, k)
        if data is None:  # never written: the slot's empty chunk, zeros
            return np.zeros(size, np.uint8)
        return self.codec.decode_planes(data, size)

    def stored(self, fd: int, frame: int, tile: int, lengths: Sequence[int] | np.ndarray | None,
               k: int) -> bytes | None:
        """The stored bytes of channel ``k`` of a tile, or None if it was never written."""
        c = self.channels[k]
        n = self.stored_length(k, lengths)
        if n == 0:
            return None
        data = os.pread(fd, n, int(self.slots[c.name][frame, tile]))
        if len(data) < n:
            raise StoreError(f"tile ({frame}, {tile}) of {c.name}: the file ends inside it")
        return data

    def payloads(self, fd: int, frame: int, tile: int,
                 lengths: Sequence[int] | np.ndarray | None) -> list[bytes]:
        """The tile's stored bytes per channel, as written (for its checksum)."""
        out = []
        for k, c in enumerate(self.channels):
            n = self.stored_length(k, lengths)
            out.append(os.pread(fd, n, int(self.slots[c.name][frame, tile])))
        return out


def read_blocks(chunks: Chunks, fd: int, frame: int, names: Sequence[str], lengths: np.ndarray | None,
                rows: slice = slice(None), cols: slice = slice(None)) -> list[np.ndarray]:
    """Channels ``names`` of ``frame`` (a unit of an expmap store), rows x cols of the
    image (step 1), assembled from the tiles they cross, which are decoded on the
    process's decode threads. ``lengths``: the frame's ``tiles/bytes`` row (T, C),
    read after the frame was complete (None for raw stores)."""
    grid = chunks.grid
    y0, y1, _ = rows.indices(grid.height)
    x0, x1, _ = cols.indices(grid.width)
    index = {c.name: k for k, c in enumerate(chunks.channels)}
    wanted = [index[n] for n in names]
    # the tiles cover the image, so every element is written
    outs = [np.empty(chunks.channels[k].shape(max(0, y1 - y0), max(0, x1 - x0)), chunks.channels[k].dtype)
            for k in wanted]
    tiles = [t for t in grid if t.y0 < y1 and t.y0 + t.height > y0 and t.x0 < x1 and t.x0 + t.width > x0]
    whole = (grid.tile_w, grid.tile_h) == (x1 - x0, y1 - y0)  # one chunk is exactly the block

    def one(t: Tile, j: int) -> None:
        row = None if lengths is None else lengths[t.index]
        if whole:  # decoded straight into place (a frame of one tile: 1080p and smaller)
            chunks.tile_chunks(fd, frame, t.index, row, [wanted[j]], into=outs[j])
            return
        (chunk,) = chunks.tile_chunks(fd, frame, t.index, row, [wanted[j]])
        ty0, ty1 = max(y0, t.y0), min(y1, t.y0 + t.height)
        tx0, tx1 = max(x0, t.x0), min(x1, t.x0 + t.width)
        outs[j][ty0 - y0:ty1 - y0, tx0 - x0:tx1 - x0] = chunk[ty0 - t.y0:ty1 - t.y0, tx0 - t.x0:tx1 - t.x0]

    jobs = [(t, j) for t in tiles for j in range(len(wanted))]
    if len(jobs) <= 1:
        for t, j in jobs:
            one(t, j)
    else:
        for fut in [decode_pool().submit(one, t, j) for t, j in jobs]:
            fut.result()
    return outs
