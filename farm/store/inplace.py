"""A tile's bytes into its slot: written by the master's writer, or by the worker that
rendered it.

While a store renders, every pixel chunk has a slot at a fixed offset of the file
(farm/store/chunks.py, farm/store/codec.py), so writing a tile means ``pwrite`` of each
channel's payload and its trailer at its slot's offset (:func:`write_payloads`), from
any process that has the file open for writing; HDF5 is not involved.

Under MPI, where a worker's host sees the master's store (a shared file system:
farm/store/shared.py), the worker writes its own tiles (:class:`SlotWriter`, on its
packing threads, as each tile is packed) and makes them durable before it tells the
master about them: a thread of the writer's own calls ``fdatasync`` on everything
written since its last sync (a group commit: tiles written while a sync runs wait for
the next one, so syncs batch themselves by the disk's speed). Only then does the worker
send the master the tile's record (its stored lengths, checksum, histogram, seconds);
the master writes the bookkeeping and the ``done`` byte as for a tile whose bytes it
wrote itself (farm/store/writer.py). So the store's order holds whoever writes the
bytes: data (durable), then ``tiles/*``, then ``done``. A worker killed mid-write
leaves a slot half written and its tile not done (rendered again on resume); a master
killed leaves slots written whose tiles are not done, which are rendered again and
written over with the same bytes.

A slot written where the master expects it can never be moved: a compacted store (no
slots, farm/store/compact.py) is refused, and the file must be the one the master
offered (its length, checked on the open descriptor).
"""

from __future__ import annotations

import collections
import os
import signal
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from farm.errors import StoreError
from farm.plan import Plan
from farm.store.chunks import Chunks


def crash_point(name: str, count: int) -> None:
    """Testing aid: ``FARM_TEST_CRASH_AT=name:n`` kills this process with SIGKILL at
    the first pass of the point ``name`` once ``count`` (for the master's writer: tiles
    whose ``done`` flag is on disk; for a worker's :class:`SlotWriter`: tiles it has
    begun to write) is at least n. Counting tiles rather than passes makes the kill land
    mid-render however the tiles happen to be batched (tests/test_checkpoint.py,
    tests/test_mpi_inplace.py)."""
    want = os.environ.get("FARM_TEST_CRASH_AT")
    if not want:
        return
    point, _, n = want.partition(":")
    if point == name and count >= int(n or 1):
        os.kill(os.getpid(), signal.SIGKILL)


def pwrite_all(fd: int, data: bytes | memoryview | np.ndarray, offset: int) -> None:
    """``data`` at ``offset`` of ``fd``, however many calls it takes."""
    view = (data.data if isinstance(data, np.ndarray) else memoryview(data)).cast("B")
    while view:
        n = os.pwrite(fd, view, offset)
        view, offset = view[n:], offset + n


def pwritev_all(fd: int, parts: Sequence[Any], offset: int) -> None:
    """``parts`` one after another from ``offset`` (one system call, no join)."""
    views = [memoryview(p).cast("B") for p in parts if len(p)]
    while views:
        n = os.pwritev(fd, views, offset)
        offset += n
        while views and n >= len(views[0]):
            n -= len(views[0])
            views.pop(0)
        if views and n:
            views[0] = views[0][n:]


def write_payloads(fd: int, chunks: Chunks, frame: int, tile: int, payloads: Sequence[Any],
                   between: Callable[[], None] | None = None) -> list[tuple[int, int]]:
    """Each channel's payload (as packed: farm/store/codec.py) and its trailer into the
    tile's slots; ``between()`` is called between channels (a crash point). Returns the
    (offset, length) ranges written."""
    written = []
    for k, c in enumerate(chunks.channels):
        if k and between is not None:
            between()
        payload, offset = payloads[k], int(chunks.slots[c.name][frame, tile])
        pwritev_all(fd, [payload, chunks.codec.trailer(len(payload), chunks.slot_bytes[c.name])], offset)
        written.append((offset, len(payload) + 8))
    return written


class SlotWriter:
    """A worker's own handle on the store, for its tiles' bytes (see the module
    docstring). :meth:`write` may be called from several threads at once; written
    tiles are handed to :meth:`submit` with whatever the caller wants back, and come
    back from :meth:`take` once durable (or, should a sync fail, as failed: their bytes
    must then reach the store another way)."""

    def __init__(self, path: str | os.PathLike[str], plan: Plan, length: int | None = None):
        """Open ``path`` for writing; ``length``: the file's length the master saw (it
        must be the same file). Raises OSError or StoreError where it cannot be used."""
        self.path = Path(path)
        self.fd = os.open(self.path, os.O_RDWR)
        try:
            with h5py.File(self.path, "r", locking=False) as f:
                chunks = Chunks.open(f, plan.channels, plan.grid)
            st = os.fstat(self.fd)
            if chunks is None or chunks.packed:
                raise StoreError(f"{self.path}: no slots to write tiles into (compacted or repacked)")
            if (length is not None and st.st_size != length) or os.stat(self.path).st_ino != st.st_ino:
                raise StoreError(f"{self.path} is not the file the master prepared")
        except BaseException:
            os.close(self.fd)
            raise
        self.chunks = chunks
        self.begun = 0  # tiles begun (the crash points count them)
        self.error: OSError | None = None  # the last failed sync's
        self._cv = threading.Condition()
        self._pending: list[Any] = []  # written, not yet synced
        self._durable: collections.deque[Any] = collections.deque()
        self._failed: collections.deque[Any] = collections.deque()
        self._syncing = 0  # items in the sync under way
        self._closing = False
        self._thread = threading.Thread(target=self._sync_loop, name="farm-slot-sync", daemon=True)
        self._thread.start()

    def write(self, frame: int, tile: int, payloads: Sequence[Any]) -> None:
        """The tile's payloads into its slots (in the page cache: :meth:`submit` it
        to have it made durable)."""
        with self._cv:
            self.begun += 1
            begun = self.begun
        crash_point("slot-start", begun)
        write_payloads(self.fd, self.chunks, frame, tile, payloads,
                       between=lambda: crash_point("slot-between-channels", begun))
        crash_point("slot-written", begun)

    def submit(self, item: Any) -> None:
        """``item`` (a written tile) comes back from :meth:`take` after the next sync."""
        with self._cv:
            self._pending.append(item)
            self._cv.notify()

    @property
    def waiting(self) -> int:
        """Items submitted and not yet taken."""
        with self._cv:
            return len(self._pending) + self._syncing + len(self._durable) + len(self._failed)

    def ready(self) -> bool:
        """Whether :meth:`take` has something."""
        return bool(self._durable or self._failed)

    def take(self) -> tuple[list[Any], list[Any]]:
        """(items now durable, items whose sync failed), each in submission order."""
        with self._cv:
            durable, failed = list(self._durable), list(self._failed)
            self._durable.clear()
            self._failed.clear()
        return durable, failed

    def _sync_loop(self) -> None:
        while True:
            with self._cv:
                while not self._pending and not self._closing:
                    self._cv.wait()
                if self._closing:  # what is not synced yet is not reported: rendered again
                    return
                batch, self._pending = self._pending, []
                self._syncing = len(batch)
            try:
                os.fdatasync(self.fd)
            except OSError as err:
                with self._cv:
                    self.error = err
                    self._failed.extend(batch)
                    self._syncing = 0
                continue
            crash_point("slot-synced", self.begun)
            with self._cv:
                self._durable.extend(batch)
                self._syncing = 0

    def close(self) -> None:
        """Stop syncing (a sync under way ends first) and close the file."""
        with self._cv:
            self._closing = True
            self._cv.notify()
        self._thread.join()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
