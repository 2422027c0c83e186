"""The master's writer: raw writes at fixed offsets, ordered so that nothing is lost.

The store's datasets were allocated when it was created (:mod:`farm.store.layout`),
so writing a tile means writing its bytes where HDF5 already expects them; the
HDF5 library is never open for writing during a render. A batch of finished tiles
is written in this order:

1. each tile's chunk of ``iterations``, ``fraction`` and any other channel, as the
   worker packed it (compressed, farm/store/codec.py, or raw), and its ``tiles/*``
   entries (``tiles/crc``, computed by the worker, covers the stored bytes;
   ``tiles/bytes``, their lengths);
2. each tile's ``done`` byte (a one-byte write is atomic);
3. for every frame whose tiles are now all done: its ``histogram`` row, then its
   ``frame_done`` byte.

Under MPI, where the workers see the store, step 1's chunks are written by the worker
that rendered the tile and are durable before the master hears of it
(farm/store/inplace.py, ``Finished.in_place``): the master writes the rest.

A process killed anywhere (crash, ``kill -9``, preemption) loses nothing written:
the writes are in the kernel's page cache in this order, and a tile whose bytes were
half written has ``done = 0`` and is rendered again.

A power loss or kernel crash can drop or reorder page-cache writes. Against that a
thread of the writer's own (``farm-sync``) calls ``fdatasync`` every ``sync_every``
seconds (and once when the last tile is written, beside the video's tail, and the
writer once more at the end) and then records the time the sync began in the run's
``synced``; on resume (:meth:`StoreWriter.recover`), every tile finished after the
last recorded sync is checked against its crc, failing tiles are rendered again, and
the histogram rows of their frames are rebuilt. The writes themselves never wait for
the disk: syncing per batch held a 1080p fp128 render on one H200 to the disk's speed
(the writer was 98% busy; BENCHMARKS.md), and starting write-back as the writer went
(on its thread or on the syncer's) slowed the writer of a fast 1080p zoom on an H100.

Histograms: the device histogram of each tile is summed in memory per frame and
written once, when the frame completes, so no row is ever counted twice. After a
resume, frames that were part-done get their sums back from the stored counts of
their done tiles (:meth:`StoreWriter.restore_histograms`): a tile's histogram is by
definition the bincount of its stored counts.

tests/test_checkpoint.py kills the master inside each of these steps
(``FARM_TEST_CRASH_AT``) and at random moments, and checks the resumed store.
"""

from __future__ import annotations

import collections
import ctypes
import dataclasses
import functools
import os
import queue
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np

from farm.errors import StoreError
from farm.plan import Plan
from farm.store import layout, space
from farm.store.chunks import Chunks
from farm.store.codec import payload_crc, raw_crc
from farm.store.inplace import crash_point as _crash_point
from farm.store.inplace import pwrite_all, write_payloads


@dataclass
class Finished:
    """A tile result as the writer takes it: packed by the worker
    (:func:`farm.store.codec.pack`)."""

    frame: int
    tile: int
    payloads: list[bytes | memoryview]  # per channel, in the plan's order: the chunk as stored
    hist_bins: np.ndarray  # int64
    hist_counts: np.ndarray  # int64
    seconds: float  # device time
    rank: int
    crc: int  # tiles/crc (farm/store/codec.py)
    counters: tuple[float, ...] = ()  # the worker's running totals (farm.runtime.timeline)
    # the payloads are in their slots already, written by the worker (farm/store/inplace.py);
    # once it sends the result they are durable too, and only their ``lengths`` travel
    in_place: bool = False
    lengths: tuple[int, ...] = ()

    def stored_lengths(self) -> list[int]:
        """Each channel's stored length (``tiles/bytes``)."""
        return list(self.lengths) if self.in_place and not self.payloads else [len(p) for p in self.payloads]

    def record(self) -> Finished:
        """This result without its payloads, for a tile written in place."""
        return dataclasses.replace(self, payloads=[], in_place=True, lengths=tuple(self.stored_lengths()))


_SYNC_FILE_RANGE_WRITE = 2  # linux/fs.h


@functools.cache
def _sync_file_range() -> Callable[..., int] | None:
    """libc's sync_file_range (Linux), or None."""
    try:
        fn = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    return fn


def start_writeback(fd: int, offset: int = 0, nbytes: int = 0) -> None:
    """Ask the kernel to start writing the file's dirty pages in ``offset ..
    offset + nbytes`` (0: to the end) now, without waiting (Linux sync_file_range;
    nothing elsewhere). Durability still comes from the periodic fdatasync: this only
    keeps the dirty backlog small, so a large store's final sync takes a moment."""
    fn = _sync_file_range()
    if fn is not None:
        fn(fd, offset, nbytes, _SYNC_FILE_RANGE_WRITE)


class RowSum:
    """A frame's histogram row summed from its tiles' sparse ``(bins, counts)``: held
    from the lowest count seen (``lo``) to the highest, as the writer writes it. A deep
    frame's limit may be 10^7 counts while its pixels escape within a few thousand
    counts of each other: a whole row (80 MB) for each frame in flight cost the writer
    a pass over it per frame; this takes kilobytes."""

    def __init__(self) -> None:
        self.lo = 0
        self.counts = np.zeros(0, np.int64)

    def add(self, bins: np.ndarray, counts: np.ndarray) -> None:
        """Add one tile's counts (``bins`` distinct, ascending)."""
        if len(bins) == 0:
            return
        lo, hi = int(bins[0]), int(bins[-1]) + 1
        if len(self.counts) == 0:
            self.lo, self.counts = lo, np.zeros(hi - lo, np.int64)
        elif lo < self.lo or hi > self.lo + len(self.counts):
            new_lo, new_hi = min(lo, self.lo), max(hi, self.lo + len(self.counts))
            grown = np.zeros(new_hi - new_lo, np.int64)
            grown[self.lo - new_lo:self.lo - new_lo + len(self.counts)] = self.counts
            self.lo, self.counts = new_lo, grown
        self.counts[np.asarray(bins, np.int64) - self.lo] += np.asarray(counts, np.int64)

    def full(self, bins: int) -> np.ndarray:
        """The whole row of ``bins`` counts."""
        row = np.zeros(bins, np.int64)
        row[self.lo:self.lo + len(self.counts)] = self.counts
        return row


class StoreWriter:
    """Open store for raw writes (one per render, in the master). ``codec`` is how the
    store's chunks are encoded: the workers must pack tiles with it."""

    def __init__(self, path: str | os.PathLike[str], plan: Plan, workers: int = 1,
                 sync_every: float = 10.0):
        self.path = Path(path)
        self.plan = plan
        grid = plan.grid
        self.tw, self.th = grid.tile_w, grid.tile_h
        with h5py.File(self.path, "r") as f:
            self.offsets = layout.offsets(f)
            self.channels = plan.channels
            chunks = Chunks.open(f, self.channels, grid)
            if chunks is None:
                raise StoreError(f"{self.path}: its chunks are not the slots this farm writes "
                                 "(repacked?); it can be read, not resumed")
            self.chunks = chunks
            self.codec = chunks.codec
            self.done = f["done"][...].astype(bool)
            self.flagged = int(self.done.sum())  # tiles whose done flag is on disk
            self.frame_done = f["frame_done"][...].astype(bool)
            runs = f["runs"][...]
            # the (F, T) bookkeeping (tiles/bytes: (F, T, C)), mirrored, written as row spans
            names = [*layout.TILE_META, *([layout.BYTES] if self.codec.compressed else [])]
            self.meta = {name: f[name][...] for name in names}
        started = runs["started"]
        used = np.flatnonzero(started > 0)
        # tiles finished after this time may not be on disk after a power loss (none in a
        # compacted store, fsynced whole: farm/store/compact.py)
        synced = float(runs["synced"][used[-1]]) if len(used) else 0.0
        self.unsynced_since = np.inf if chunks.packed else synced
        self.bins = plan.bins
        self.tiles = grid.count
        self.fd = os.open(self.path, os.O_RDWR)
        free = np.flatnonzero(started == 0)
        self.run = int(free[0]) if len(free) else layout.RUNS - 1
        self._run_row = np.zeros(1, dtype=layout.RUN_DTYPE)
        self._run_row["started"], self._run_row["workers"] = time.time(), workers
        self._write_run_row()
        self.hist: dict[int, RowSum] = {}  # part-done frames' histogram sums
        # frames whose histogram row may have been written before (a check found a tile
        # of theirs damaged): their row is written whole
        self._written_rows: set[int] = set()
        self.sync_every = sync_every
        self._run_lock = threading.Lock()  # the run row: written by the writer and the syncer
        self.sync_error: OSError | None = None  # the syncer's, raised by the next write
        self._stop_syncing = threading.Event()
        self._sync_now = threading.Event()  # sync_soon: sync at the syncer's next look
        self._data_ranges: collections.deque[tuple[int, int]] = collections.deque()  # written, to push
        self._syncer = threading.Thread(target=self._sync_loop, name="farm-sync", daemon=True)
        self._syncer.start()

    def _write_run_row(self) -> None:
        self._pwrite(self._run_row.tobytes(), self.offsets["runs"] + self.run * layout.RUN_DTYPE.itemsize)

    def end_run(self, timeline: dict[str, float]) -> None:
        """Record when this run ended and its timeline: any fields of layout.RUN_DTYPE
        (master_busy, writer_busy, gpu_s, ...; farm/runtime/timeline.py)."""
        with self._run_lock:
            self._run_row["ended"] = time.time()
            for name, value in timeline.items():
                self._run_row[name] = value
            self._write_run_row()

    def sync(self) -> None:
        """fdatasync, then record that everything written before it began is on disk."""
        began = time.time()
        os.fdatasync(self.fd)
        with self._run_lock:
            self._run_row["synced"] = began
            self._write_run_row()

    def sync_soon(self) -> None:
        """Have the syncer thread sync now, not at its next period: when the last tile is
        written and the video is still being made, the store's data (everything since
        the last periodic sync: a whole 2.5 GB store after a 5 s render) goes to disk
        beside the video's tail instead of in ``close``, after it."""
        self._sync_now.set()

    def _sync_loop(self) -> None:
        """The syncer thread (see the module docstring). With FARM_WRITEBACK=1 (a
        developer knob) it also starts, between syncs, the write-back of the tiles' data
        written since its last look (never of the bookkeeping pages, which are written
        again and again): on an H100 host that slowed the writer (the 360-frame 1080p
        minibrot zoom's render phase 5.6 s against 4.4 s without), so it is off."""
        last = time.monotonic()
        push = os.environ.get("FARM_WRITEBACK", "0") == "1"  # developer knob (see the docstring)
        while not self._stop_syncing.wait(0.25):
            try:
                if self._sync_now.is_set() or time.monotonic() - last >= self.sync_every:
                    self._sync_now.clear()
                    self.sync()
                    last = time.monotonic()
                    self._data_ranges.clear()
                else:
                    while self._data_ranges:
                        rng = self._data_ranges.popleft()
                        if push:
                            start_writeback(self.fd, *rng)
            except OSError as err:  # a full disk: the writer stops the render with it
                self.sync_error = err
                return

    # ------------------------------------------------------------------ raw access
    def _pwrite(self, data: bytes | np.ndarray, offset: int) -> None:
        pwrite_all(self.fd, data, offset)

    def _tile_meta_offset(self, name: str, frame: int, tile: int) -> int:
        """Offset of tile (frame, tile)'s entry of a (F, T[, C]) dataset: tiles/* or done."""
        per_tile = self.meta[name][0, 0].nbytes if name in self.meta else 1
        return self.offsets[name] + (frame * self.tiles + tile) * per_tile

    def _lengths(self, frame: int, tile: int) -> np.ndarray | None:
        return self.meta[layout.BYTES][frame, tile] if self.codec.compressed else None

    def read_tile(self, frame: int, tile: int) -> dict[str, np.ndarray]:
        """Every channel of a stored tile, cropped to the image."""
        t = self.plan.grid.tile(tile)
        chunks = self.chunks.tile_chunks(self.fd, frame, tile, self._lengths(frame, tile))
        return {c.name: chunk[: t.height, : t.width] for c, chunk in zip(self.channels, chunks, strict=True)}

    def stored_crc(self, frame: int, tile: int) -> int:
        """The crc of a tile's bytes as they are in the file (``tiles/crc``'s definition)."""
        if self.codec.compressed:
            return payload_crc(self.chunks.payloads(self.fd, frame, tile, self._lengths(frame, tile)))
        return raw_crc(list(self.read_tile(frame, tile).values()))

    # ------------------------------------------------------------------ writes
    def write(self, results: Iterable[Finished]) -> list[int]:
        """Store a batch of tiles durably; returns the frames that became complete."""
        results = [r for r in results if not self.done[r.frame, r.tile]]
        if not results:
            return []
        if self.chunks.packed:  # no slots (farm/store/compact.py expands it first)
            raise StoreError(f"{self.path} is compacted: no tile can be written into it")
        now = time.time()
        for r in results:
            if not r.in_place:  # (else the worker wrote them, durably, before it said so)
                self._data_ranges.extend(write_payloads(
                    self.fd, self.chunks, r.frame, r.tile, r.payloads,
                    between=lambda: _crash_point("between-datasets", self.flagged)))
            for name, value in (("tiles/seconds", r.seconds), ("tiles/rank", r.rank),
                                ("tiles/run", self.run), ("tiles/finished", now),
                                ("tiles/crc", r.crc)):
                self.meta[name][r.frame, r.tile] = value
            if self.codec.compressed:
                self.meta[layout.BYTES][r.frame, r.tile] = r.stored_lengths()
        spans = self._row_spans(results)
        for name, values in self.meta.items():
            for frame, lo, hi in spans:
                self._pwrite(values[frame, lo:hi], self._tile_meta_offset(name, frame, lo))
        _crash_point("before-flags", self.flagged)
        for r in results:
            self.done[r.frame, r.tile] = True
            self._histogram(r.frame).add(r.hist_bins, r.hist_counts)
        flags = self.done.view(np.uint8)
        for frame, lo, hi in spans:
            _crash_point("before-done-flag", self.flagged)
            self._pwrite(flags[frame, lo:hi], self._tile_meta_offset("done", frame, lo))
            self.flagged += sum(r.frame == frame for r in results)
        complete = sorted({r.frame for r in results
                           if self.done[r.frame].all() and not self.frame_done[r.frame]})
        self._write_histograms(complete)
        if self.sync_error is not None:
            raise self.sync_error
        return complete

    def _write_histograms(self, frames: list[int], whole: bool = False) -> None:
        """Write the summed rows of complete frames, then their flags. A row is written
        from its first to its last count that is not zero (a deep frame's row is mostly
        empty bins below its first escape; the rest of a row never written reads as
        zeros), or ``whole`` where it may have been written before (a resume's rebuild)."""
        for f in frames:
            acc = self.hist.pop(f, None) or RowSum()
            lo, row = acc.lo, acc.counts
            if whole or f in self._written_rows:
                lo, row = 0, acc.full(self.bins)
            self._pwrite(row, self.offsets["histogram"] + (f * self.bins + lo) * 8)
            _crash_point("after-histogram-row", self.flagged)
        for f in frames:
            self._pwrite(b"\x01", self.offsets["frame_done"] + f)
            self.frame_done[f] = True

    @staticmethod
    def _row_spans(results: list[Finished]) -> list[tuple[int, int, int]]:
        """(frame, first tile, last tile + 1) covering the batch, one span per frame.
        Writing a span also rewrites the tiles between with their (unchanged) values."""
        spans: dict[int, list[int]] = {}
        for r in results:
            lo_hi = spans.setdefault(r.frame, [r.tile, r.tile])
            lo_hi[0], lo_hi[1] = min(lo_hi[0], r.tile), max(lo_hi[1], r.tile)
        return [(f, lo, hi + 1) for f, (lo, hi) in sorted(spans.items())]

    def _histogram(self, frame: int) -> RowSum:
        if frame not in self.hist:
            self.hist[frame] = RowSum()
        return self.hist[frame]

    def restore_histograms(self) -> list[int]:
        """Rebuild in-memory histogram sums of part-done frames from their stored tiles.

        Also completes frames whose tiles are all done but whose histogram row was
        not written (killed between the two). Returns the frames it completed."""
        partial = [f for f in range(len(self.plan.frames))
                   if self.done[f].any() and not self.frame_done[f]]
        for f in partial:
            acc = self.hist[f] = RowSum()
            for t in np.flatnonzero(self.done[f]):
                arrays = self.read_tile(f, int(t))
                for c in self.channels:  # "iterations", and the counts of extra samples
                    if c.name.rsplit("/", 1)[-1] == "iterations":
                        acc.add(*np.unique(arrays[c.name], return_counts=True))
        complete = [f for f in partial if self.done[f].all()]
        self._write_histograms(complete, whole=True)
        return complete

    def recover(self, full: bool = False) -> list[tuple[int, int]]:
        """Make the store consistent before resuming: check the tiles that may not have
        reached the disk (all of them with ``full``), clear the ones whose bytes fail
        their crc, and rebuild the histogram rows of their frames. Returns the bad tiles."""
        suspect = self.done & (self.meta["tiles/finished"] > self.unsynced_since - 1.0)
        if full:
            suspect = self.done.copy()
        bad = self.verify(suspect)
        for frame in np.flatnonzero(suspect.any(axis=1)):
            self._written_rows.add(int(frame))
            if self.frame_done[frame]:  # its row may be older than its flag
                self._pwrite(b"\x00", self.offsets["frame_done"] + int(frame))
                self.frame_done[frame] = False
        self.restore_histograms()
        return bad

    def verify(self, which: np.ndarray | None = None) -> list[tuple[int, int]]:
        """Check done tiles (``which``, default all) against their crc; clear ``done``
        where it fails."""
        crcs = self.meta["tiles/crc"]
        bad = []
        which = self.done if which is None else which & self.done
        for f_idx, t_idx in zip(*np.nonzero(which), strict=True):
            if self.stored_crc(int(f_idx), int(t_idx)) != crcs[f_idx, t_idx]:
                bad.append((int(f_idx), int(t_idx)))
        for f_idx, t_idx in bad:
            self._written_rows.add(f_idx)
            self._pwrite(b"\x00", self._tile_meta_offset("done", f_idx, t_idx))
            self.done[f_idx, t_idx] = False
            if self.frame_done[f_idx]:
                self._pwrite(b"\x00", self.offsets["frame_done"] + f_idx)
                self.frame_done[f_idx] = False
        self.flagged -= len(bad)
        return bad

    def pending(self) -> list[tuple[int, int]]:
        """Tiles not yet done, frame by frame."""
        return [(int(f), int(t)) for f, t in zip(*np.nonzero(~self.done), strict=True)]

    def close(self) -> None:
        self._stop_syncing.set()
        self._syncer.join()
        if self.fd >= 0:
            try:
                self.sync()
            except OSError as err:  # full disk, I/O error: the last sync is not recorded,
                if not space.is_disk_full(err):  # so a resume checks the later tiles
                    raise
            finally:
                os.close(self.fd)
                self.fd = -1

    def __enter__(self) -> StoreWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class WriterThread:
    """Writes on a thread of its own, so the master keeps receiving while the disk works.

    ``submit`` queues a batch; the thread writes everything queued at once (one
    fdatasync per round, so rounds grow when the disk is slow). ``close`` waits for
    the queue to drain. After an error in the thread (``error``) nothing more is
    written; the master looks at it after every round of events."""

    def __init__(self, writer: StoreWriter, on_frame: Callable[[int], None] | None = None):
        """``on_frame(f)`` hears of each frame whose tiles and histogram are stored (the
        video sink), from this thread."""
        self.writer = writer
        self.on_frame = on_frame
        self.busy_s = 0.0
        self._queue: queue.Queue[list[Finished] | None] = queue.Queue()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="farm-writer", daemon=True)
        self._thread.start()

    @property
    def error(self) -> BaseException | None:
        return self._error

    def submit(self, batch: list[Finished]) -> None:
        if self._error is None:
            self._queue.put(batch)

    def _run(self) -> None:
        while True:
            batch = self._queue.get()
            if batch is None:
                return
            stop = False
            while not self._queue.empty():  # take everything that is waiting
                more = self._queue.get()
                if more is None:
                    stop = True
                    break
                batch.extend(more)
            t0 = time.monotonic()
            try:
                complete = self.writer.write(batch)
            except BaseException as err:  # the master raises it
                self._error = err
                return
            self.busy_s += time.monotonic() - t0
            if self.on_frame is not None:
                for f in complete:
                    self.on_frame(f)
            if stop:
                return

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join()
