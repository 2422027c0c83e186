"""A finished store compacted: its chunks end to end, so that it takes its compressed
size everywhere, in ``ls -l`` and in copies as on disk.

While a render runs, every pixel chunk has a slot of its uncompressed size
(farm/store/codec.py) and every histogram row its full length, written only in part:
the file is sparse, ``ls -l`` shows 2.5-3x what ``du`` shows, and copies that do not
keep holes (``shutil.copyfile``, ``tar``, ``scp``, ``rsync`` without ``-S``, object
stores) write the holes out as zeros. Once every tile and every frame is done,
:func:`compact` rewrites the store into ``.NAME.PID.compact`` beside it:

- each pixel chunk as just its stored bytes (its ``tiles/bytes``; a raw store's: the
  chunk), written through HDF5 (``H5Dwrite_chunk``) so that HDF5's chunk index points
  at them, end to end, frame after frame, with the same chunk shape and filters;
- ``histogram`` chunked by :data:`ROW_CHUNK` bins of a row, unfiltered, holding only
  the chunks with a count (the others read as zeros, as the holes did);
- every other dataset copied by HDF5 (``H5Ocopy``: contiguous and allocated as before,
  so the bookkeeping a later resume writes, its run's row, still goes in place), and
  the root's attributes as they are;

then fsyncs it, renames it over the store and fsyncs the folder. Every dataset reads
back bitwise the same, through h5py (with hdf5plugin) and through the farm's reader
(which reads packed chunks with pread as it reads slots: farm/store/chunks.py). A kill
at any moment before the rename leaves the store as the render left it, and the
temporary, which the next render or resume of the store removes
(:func:`farm.store.layout.remove_stale`) before it compacts the store; after the
rename, the compacted store. The caller holds the store's lock.

A compacted store is complete: nothing is written into its chunks again (the writer
refuses), only its run rows and the ``videos`` attribute. ``farm resume --verify``
checks its tiles read-only (:func:`damaged`); should one fail, :func:`expand` rewrites
the store with slots again, as a render leaves it, so that the tile is rendered again
and the store compacted anew.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np

from farm.errors import StoreError
from farm.plan import Plan
from farm.runtime.byte_sizes import human
from farm.store import layout, space
from farm.store.chunks import Chunks, compacted
from farm.store.codec import SparseWriter, payload_crc, raw_crc
from farm.store.sparse_rows import PackedRows, data_ranges
from farm.store.writer import _crash_point

ROW_CHUNK = 1024  # bins of a histogram row a chunk of a compacted store holds (8 KiB)
SUFFIX = ".compact"  # the temporary: .NAME.PID.compact


@dataclass(frozen=True)
class Compaction:
    """What a compaction did: the store's length (``ls -l``) and blocks (``du``) before
    and after, in bytes, and the seconds it took."""

    length_before: int
    disk_before: int
    length: int
    disk: int
    seconds: float


class NoRoom(OSError):
    """Less free space than compacting the store needs (errno ENOSPC)."""


def is_compact(path: str | os.PathLike[str]) -> bool:
    """Whether the store at ``path`` was compacted."""
    with h5py.File(path, "r", locking=False) as f:
        return compacted(f)


def compact(path: str | os.PathLike[str], plan: Plan) -> Compaction | None:
    """Compact the store at ``path`` (see the module docstring) when every tile and
    frame of it is done and it is not compacted yet; None otherwise. The caller holds
    the store's lock. An OSError (a full disk: :func:`farm.store.space.is_disk_full`)
    leaves the store as it was; NoRoom, an OSError too, says that the free space is
    less than the store takes (checked first)."""
    path = Path(path)
    layout.remove_stale(path)  # a compaction killed before
    with h5py.File(path, "r", locking=False) as f:
        if compacted(f) or not (f["done"][...].all() and f["frame_done"][...].all()):
            return None
    t0 = time.perf_counter()
    st = os.stat(path)
    need, have = st.st_blocks * 512 + (1 << 20), space.free(path)
    if need > have:
        raise NoRoom(errno.ENOSPC, f"compacting it needs {human(need)} free, its file system has "
                     f"{human(have)}")
    with _replacing(path, "compact") as tmp:
        _write_compact(path, tmp, plan)
    now = os.stat(path)
    return Compaction(st.st_size, st.st_blocks * 512, now.st_size, now.st_blocks * 512,
                      time.perf_counter() - t0)


def damaged(path: str | os.PathLike[str], plan: Plan) -> list[tuple[int, int]]:
    """The done tiles of the store at ``path`` whose stored bytes fail their checksum
    (``tiles/crc``; what the writer's verify checks, without writing anything)."""
    with h5py.File(path, "r", locking=False) as f:
        chunks = Chunks.open(f, plan.channels, plan.grid)
        done, crcs = f["done"][...].astype(bool), f["tiles/crc"][...]
        lengths = f[layout.BYTES][...] if layout.BYTES in f else None
    if chunks is None:
        return []  # not written in place: the writer says so
    bad = []
    fd = os.open(path, os.O_RDONLY)
    try:
        for frame, t in zip(*np.nonzero(done), strict=True):
            row = None if lengths is None else lengths[frame, t]
            if chunks.codec.compressed:
                crc = payload_crc(chunks.payloads(fd, int(frame), int(t), row))
            else:
                tile = plan.grid.tile(int(t))
                arrays = chunks.tile_chunks(fd, int(frame), int(t), row)
                crc = raw_crc([a[:tile.height, :tile.width] for a in arrays])
            if crc != crcs[frame, t]:
                bad.append((int(frame), int(t)))
    finally:
        os.close(fd)
    return bad


def expand(path: str | os.PathLike[str], plan: Plan) -> None:
    """Rewrite the compacted store at ``path`` as a render leaves it, every chunk in its
    slot and the histogram contiguous (sparse, the same data), so that tiles can be
    written into it again; atomically, as :func:`compact`."""
    path = Path(path)
    layout.remove_stale(path)
    with _replacing(path, "expand") as tmp:
        _write_expanded(path, tmp, plan)


@contextlib.contextmanager
def _replacing(path: Path, what: str) -> Iterator[Path]:
    """A temporary beside ``path`` for the body to write; then fsynced, given the store's
    permissions and renamed over it, and the folder fsynced. Removed if the body fails.
    (Tests kill the process at ``FARM_TEST_CRASH_AT=WHAT-end``, before the rename.)"""
    tmp = path.with_name(f".{path.name}.{os.getpid()}{SUFFIX}")
    try:
        yield tmp
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.chmod(tmp, stat.S_IMODE(os.stat(path).st_mode))
        _crash_point(f"{what}-end", 1)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def _pixels(plan: Plan) -> dict[str, int]:
    return {c.name: k for k, c in enumerate(plan.channels)}


def _skeleton(src: h5py.File, dst: h5py.File, plan: Plan) -> None:
    """The root's attributes, the groups, every dataset but the pixel channels and the
    histogram copied by HDF5 (contiguous ones stay contiguous and allocated), and the
    pixel channels created empty with their chunk shape and filters."""
    for name in src.attrs:
        aid = src.attrs.get_id(name)
        dst.attrs.create(name, src.attrs[name], shape=aid.shape, dtype=aid.dtype)
    names: list[str] = []
    src.visit(names.append)
    pixels = _pixels(plan)
    for name in names:
        obj = src[name]
        if isinstance(obj, h5py.Group):
            dst.require_group(name)
        elif name not in pixels and name != "histogram":
            h5py.h5o.copy(src.id, name.encode(), dst.id, name.encode())
    for name in pixels:
        dset = src[name].id
        parent, _, base = name.rpartition("/")
        where = dst[parent] if parent else dst
        h5py.h5d.create(where.id, base.encode(), dset.get_type(), dset.get_space(),
                        dcpl=dset.get_create_plist())


def _corners(plan: Plan, name: str) -> list[tuple[int, ...]]:
    """Each tile's chunk coordinates after the frame's, in tile order."""
    depth = next(c.depth for c in plan.channels if c.name == name)
    return [(t.y0, t.x0, *(0,) * (depth > 1)) for t in plan.grid]


def _write_compact(path: Path, tmp: Path, plan: Plan) -> None:
    with h5py.File(path, "r", locking=False) as src, \
            h5py.File(tmp, "w", libver="earliest", locking=False) as dst:
        chunks = Chunks.open(src, plan.channels, plan.grid)
        if chunks is None:
            raise _not_ours(path)
        lengths = src[layout.BYTES][...] if chunks.codec.compressed else None
        hist_at = layout.offsets(src)["histogram"]
        frames, bins = src["histogram"].shape
        _crash_point("compact-start", 1)  # (tests: the temporary begun)
        _skeleton(src, dst, plan)
        fd = os.open(path, os.O_RDONLY)
        try:
            ids = {c.name: dst[c.name].id for c in plan.channels}
            corners = {c.name: _corners(plan, c.name) for c in plan.channels}
            th, tw = plan.grid.tile_h, plan.grid.tile_w
            empty = {c.name: chunks.codec.encode(np.zeros(c.shape(th, tw), c.dtype)) for c in plan.channels}
            for frame in range(frames):  # a frame's chunks together, channel after channel
                if frame == frames // 2:
                    _crash_point("compact-middle", 1)
                for k, c in enumerate(plan.channels):
                    for t, corner in enumerate(corners[c.name]):
                        row = None if lengths is None else lengths[frame, t]
                        data = chunks.stored(fd, frame, t, row, k)  # (None: never written)
                        ids[c.name].write_direct_chunk((frame, *corner), data or empty[c.name])
            width = min(ROW_CHUNK, bins)
            hist = dst.create_dataset("histogram", shape=(frames, bins), dtype="<i8", chunks=(1, width))
            for frame in range(frames):
                for first, data in _row_chunks(fd, hist_at + frame * bins * 8, bins, width):
                    hist.id.write_direct_chunk((frame, first), data)
        finally:
            os.close(fd)


def _row_chunks(fd: int, start: int, bins: int, width: int) -> Iterator[tuple[int, bytes]]:
    """(first bin, the chunk's bytes) of each chunk of ``width`` bins of the int64 row
    of ``bins`` entries at byte ``start`` that holds a count, read past the row's holes
    (farm/store/sparse_rows.py); the last chunk padded with zeros."""
    ranges = data_ranges(fd, start, start + 8 * bins)
    if ranges is None:
        ranges = [(start, start + 8 * bins)]
    seen: set[int] = set()
    for a, b in ranges:
        for k in range((a - start) // (8 * width), (b - 1 - start) // (8 * width) + 1):
            if k in seen:
                continue
            seen.add(k)
            first = k * width
            n = min(width, bins - first)
            data = os.pread(fd, 8 * n, start + 8 * first)
            if np.frombuffer(data, np.uint8).any():
                yield first, data + bytes(8 * width - len(data))


def _write_expanded(path: Path, tmp: Path, plan: Plan) -> None:
    with h5py.File(path, "r", locking=False) as src:
        chunks = Chunks.open(src, plan.channels, plan.grid)
        if chunks is None:
            raise _not_ours(path)
        codec = chunks.codec
        lengths = src[layout.BYTES][...] if codec.compressed else None
        rows = PackedRows.of(src["histogram"])
        frames, bins = src["histogram"].shape
        heads = layout.slot_templates(plan, codec) if codec.compressed else {}
        tile_px = plan.grid.tile_h * plan.grid.tile_w
        slots = {codec.slot_bytes(c.nbytes(tile_px)): heads[c.name] for c in plan.channels if heads}
        with SparseWriter(tmp, slots) as sparse, h5py.File(sparse, "w", libver="earliest") as dst:
            _skeleton(src, dst, plan)
            if codec.compressed:
                layout.write_slots(dst, plan, codec, heads)
            layout.fixed(dst, "histogram", (frames, bins), "<i8")
    with h5py.File(tmp, "r", locking=False) as f:
        into = Chunks.open(f, plan.channels, plan.grid)
        hist_at = layout.offsets(f)["histogram"]
    assert into is not None and rows is not None
    src_fd, fd = os.open(path, os.O_RDONLY), os.open(tmp, os.O_RDWR)
    try:
        for frame in range(frames):
            for k, c in enumerate(plan.channels):
                for t in range(plan.grid.count):
                    data = chunks.stored(src_fd, frame, t, None if lengths is None else lengths[frame, t], k)
                    if data is not None:
                        slot = into.slot_bytes[c.name]
                        _pwrite(fd, data + codec.trailer(len(data), slot), int(into.slots[c.name][frame, t]))
            for first, offset, size in rows.chunks(frame):
                counts = np.frombuffer(os.pread(src_fd, size, offset), "<i8")[:bins - first]
                nz = np.flatnonzero(counts)  # a row as the writer writes it: first to last count
                if len(nz):
                    at = hist_at + (frame * bins + first + nz[0]) * 8
                    _pwrite(fd, counts[nz[0]:nz[-1] + 1].tobytes(), at)
    finally:
        os.close(src_fd)
        os.close(fd)


def _pwrite(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, offset)
        view, offset = view[n:], offset + n


def _not_ours(path: Path) -> StoreError:
    return StoreError(f"{path}: its chunks are neither slots nor packed (repacked?); it can be "
                      "read, not compacted")

