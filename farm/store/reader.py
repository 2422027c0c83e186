"""Read-only access to a store: its spec and plan, frames, histograms and tiles done
(its progress report: farm/store/status.py).

Readers open the file with h5py in read mode; they may run while a render writes
(the writer never holds HDF5 open), e.g. ``farm status`` from a second shell.

An expmap store (farm/plan/units.py) holds render units, not frames; its reader
still serves video frames: ``frames``, ``frame_done``, ``raw``, ``iterations``,
``fraction`` and ``histogram`` are those of the synthesised video frames
(:mod:`farm.synth.engine`, on a GPU where there is one), so colouring and encoding
read both methods alike. ``units``, ``unit_done``, ``unit``, ``strip_rows`` and
``centre_image`` give the rendered data itself.
"""

from __future__ import annotations

import functools
import os
import threading
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from farm import spec as specmod
from farm.color.raw import PlanesFrame, RawFrame
from farm.errors import StoreError
from farm.plan import ExpmapLayout, Plan, TileGrid, make_plan
from farm.plan.channels import channels_for
from farm.plan.reference_types import References
from farm.store import layout
from farm.store.chunks import Chunks, channel_codec, decode_pool, read_blocks
from farm.store.codec import Codec
from farm.store.sparse_rows import PackedRows, row_prefix, trimmed
from farm.store.status import status as store_status
from farm.synth import Raster

# each store's chunk slots, found once per process: (path, device, inode, created) -> slots
_CHUNKS: dict[tuple, Chunks | None] = {}


@functools.lru_cache(maxsize=16)
def _parsed(text: str, source: str) -> specmod.JobSpec:
    """A stored spec, parsed once per process (the video's frame threads open the store
    for every frame)."""
    return specmod.parse_text(text, source=source)


class Store:
    """A store opened for reading. Use as a context manager.

    ``own_synthesis``: an expmap store's frames are synthesised by this reader's own
    :class:`~farm.synth.engine.Synthesis` (its window of strip rows), not the one
    shared by the process's readers of the file. A reader that walks its own run of
    frames (a video segment) needs its own: readers at different depths sharing one
    window would fetch it anew at every frame."""

    def __init__(self, path: str | os.PathLike[str], *, own_synthesis: bool = False):
        self.path = Path(path)
        self.own_synthesis = own_synthesis
        if not self.path.exists():
            raise StoreError(f"store: {path} does not exist")
        try:
            self.file = h5py.File(self.path, "r", locking="best-effort")
        except OSError as err:
            raise StoreError(f"store: {path} is not a readable HDF5 file ({err})") from None
        found = self.file.attrs.get("format")
        if found not in layout.READABLE:
            self.file.close()
            if isinstance(found, str) and found.startswith("zoomfarm-store/"):
                raise StoreError(f"store: {path} has layout {found}, this farm reads "
                                 f"{' and '.join(layout.READABLE)}; render it again with --restart")
            raise StoreError(f"store: {path} is not a zoomfarm store (no format {layout.FORMAT!r})")
        self.format = str(found)
        self.spec_text = str(self.file.attrs["spec"])
        self.spec = _parsed(self.spec_text, f"{path}:spec")
        self.method = str(self.file.attrs.get("method", "frames"))
        self._plan: Plan | None = None
        # for reading chunks and the rows a render changes directly; opened now, so that it
        # and the HDF5 handle read the same file should the store be compacted (renamed
        # over) while this reader lives (a video finishing beside the compaction)
        self._fd = os.open(self.path, os.O_RDONLY)
        self._offset_map: dict[str, int] | None = None
        self._fd_lock = threading.Lock()
        self._chunk_key: tuple | None = None
        self._shapes: dict[str, tuple[tuple[int, ...], np.dtype]] = {}  # (_shape)
        self._synth: Any = None  # an expmap store's Synthesis, once asked
        self._rows: PackedRows | None | bool = False  # a compacted store's histogram rows

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.file.close()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    # ------------------------------------------------------------------ pixels
    @property
    def codec(self) -> Codec:
        """How the pixel channels are stored (farm/store/codec.py)."""
        return channel_codec(self.file["iterations"]) or Codec("zstd")

    def _chunks(self) -> Chunks | None:
        """The store's chunk slots, found once per process (None: read through h5py)."""
        if self._chunk_key is None:
            stat = os.stat(self.path)
            created = str(self.file.attrs.get("created"))
            self._chunk_key = (os.path.realpath(self.path), stat.st_dev, stat.st_ino, created)
        key = self._chunk_key
        if key not in _CHUNKS:
            spec = self.spec
            channels = channels_for(spec.image.samples, spec.render.distance)
            shape, chunk = self.file["iterations"].shape, self.file["iterations"].chunks
            grid = TileGrid(shape[2], shape[1], chunk[2], chunk[1])
            _CHUNKS[key] = Chunks.open(self.file, channels, grid)
        return _CHUNKS[key]

    def read(self, frame: int, names: list[str], rows: slice = slice(None),
             cols: slice = slice(None)) -> list[np.ndarray]:
        """Channels ``names`` of rendered frame (expmap: unit) ``frame``, rows x cols."""
        chunks = self._chunks()
        if chunks is None:
            return [self.file[n][frame, rows, cols] for n in names]
        lengths = self._live(layout.BYTES, frame) if chunks.codec.compressed else None
        return read_blocks(chunks, self._reader_fd(), frame, names, lengths, rows, cols)

    # ------------------------------------------------------------------ plan
    def plan(self) -> Plan:
        """The plan the store was created with: the stored per-frame (per-unit)
        iteration limits and formats win over what this version of the farm would
        choose now. Built once per reader (an expmap store's, once per process)."""
        if self._plan is None:
            self._plan = self._stored_plan()
        return self._plan

    def _stored_plan(self) -> Plan:
        max_iter = [int(m) for m in self.file["frames/max_iter"][...]]
        fmt = [p.decode() for p in self.file["frames/precision"][...]]
        video = None
        if "video/max_iter" in self.file:
            video = [int(m) for m in self.file["video/max_iter"][...]]
        return make_plan(self.spec, stored=list(zip(max_iter, fmt, strict=True)), stored_video=video)

    def references(self) -> References | None:
        """The stored references of perturbed frames (farm/plan/references.py), or None."""
        return layout.read_references(self.file)

    # ------------------------------------------------------------------ data
    @property
    def expmap(self) -> bool:
        return self.method == "expmap"

    @property
    def frames(self) -> int:
        """Frames of the video."""
        return int(self._shape("video/max_iter" if self.expmap else "iterations")[0][0])

    @property
    def units(self) -> int:
        """Rendered frames (expmap: units): the first axis of the pixel datasets."""
        return int(self.file["iterations"].shape[0])

    def _live(self, name: str, index: int | None = None) -> np.ndarray:
        """Dataset ``name`` (or its row ``index``) as it is in the file now. The writer
        changes these (done flags, histogram rows, tiles/bytes) with raw writes while a
        render runs, so they are read with pread, past HDF5's caches: a reader may stay
        open for a whole render (the video's). Through h5py when the dataset is not
        stored in place (a repacked store)."""
        offset = self._offsets().get(name)
        if offset is None:
            dset = self.file[name]
            return dset[...] if index is None else dset[index]
        full, dtype = self._shape(name)
        shape = full if index is None else full[1:]
        count = int(np.prod(shape))
        start = offset + (0 if index is None else index * count * dtype.itemsize)
        data = os.pread(self._reader_fd(), count * dtype.itemsize, start)
        return np.frombuffer(data, dtype=dtype).reshape(shape)

    def _shape(self, name: str) -> tuple[tuple[int, ...], np.dtype]:
        """Shape and dtype of dataset ``name``, fixed for the store's life: looked up once
        (opening a dataset costs more than a frame's other bookkeeping)."""
        if name not in self._shapes:
            dset = self.file[name]
            self._shapes[name] = (dset.shape, dset.dtype)
        return self._shapes[name]

    def _offsets(self) -> dict[str, int]:
        if self._offset_map is None:
            try:
                self._offset_map = layout.offsets(self.file)
            except StoreError:
                self._offset_map = {}
        return self._offset_map

    def _reader_fd(self) -> int:
        with self._fd_lock:  # the video's frame threads share one reader
            if self._fd < 0:
                self._fd = os.open(self.path, os.O_RDONLY)
            return self._fd

    def done(self) -> np.ndarray:
        """bool (units, tiles): which tiles are stored."""
        return self._live("done").astype(bool)

    def unit_done(self) -> np.ndarray:
        """bool (units,): which rendered frames (expmap: units) are complete."""
        return self._live("frame_done").astype(bool)

    def frame_done(self) -> np.ndarray:
        """bool (frames,): which video frames can be read (expmap: their units are
        complete)."""
        if not self.expmap:
            return self.unit_done()
        ready = np.zeros(self.frames, bool)
        ready[self.layout.frames_ready(self.unit_done())] = True
        return ready

    def iterations(self, frame: int) -> np.ndarray:
        if self.expmap:
            return self.raw(frame).iterations
        return self.read(frame, ["iterations"])[0]

    def fraction(self, frame: int) -> np.ndarray:
        if self.expmap:
            return self.raw(frame).fraction
        return self.read(frame, ["fraction"])[0]

    def histogram(self, frame: int, full: bool = True) -> np.ndarray:
        """Frame f's count histogram, int64 (N,), N = the store's histogram length; with
        ``full=False`` the row up to its last count that is not zero (what colouring
        needs), read from the parts of the file the writer wrote (farm/store/sparse_rows.py)."""
        n = int(self._shape("histogram")[0][1])
        if self.expmap:
            row = self.raw(frame).histogram
            return np.pad(row, (0, n - len(row))) if full else row
        if full:
            return self._live("histogram", frame)
        offset = self._offsets().get("histogram")
        if offset is None:  # compacted (farm/store/compact.py), or repacked: through h5py
            if self._rows is False:
                self._rows = PackedRows.of(self.file["histogram"])
            if isinstance(self._rows, PackedRows):
                return self._rows.prefix(self._reader_fd(), frame)
            return trimmed(self._live("histogram", frame))
        return row_prefix(self._reader_fd(), offset + frame * n * 8, n)

    def channel(self, name: str, frame: int) -> np.ndarray:
        """One per-pixel channel of a frame: (H, W) or (H, W, depth)."""
        if self.expmap:
            value = getattr(self.raw(frame), name, None) if name in ("iterations", "fraction",
                                                                       "distance") else None
            if value is None:
                raise StoreError(f"store {self.path}: synthesised frames have no {name!r}")
            return value
        return self.read(frame, [name])[0]

    def raw(self, frame: int) -> RawFrame:
        """Everything colouring needs of one frame (see :mod:`farm.color.raw`): arrays (H, W),
        or (H, W, N) with sample 0 (the pixel centre, the ``iterations`` dataset) first
        when the store has N > 1 samples per pixel; ``distance`` when it was rendered.
        An expmap store's frame is synthesised from its units (StoreError if one is
        missing)."""
        if self.expmap:
            return self._expmap_frame(frame)
        n = self.spec.image.samples
        names = ["iterations", "fraction", *(["distance"] if self.spec.render.distance else [])]
        wanted = names + (["samples/" + name for name in names] if n > 1 else [])
        got = dict(zip(wanted, self.read(frame, wanted), strict=True))

        def full(name: str) -> np.ndarray:
            if n == 1:
                return got[name]
            return np.concatenate([got[name][..., None], got["samples/" + name]], axis=2)

        return RawFrame(frame, full("iterations"), full("fraction"), self.histogram(frame, full=False),
                        full("distance") if "distance" in names else None)

    def planes(self, frame: int) -> PlanesFrame | None:
        """Frame ``frame`` as its channels' byte planes (:class:`farm.color.raw.PlanesFrame`),
        for a colourer that unshuffles on the device; None where the store cannot give
        them so (uncompressed, an expmap store, several samples a pixel, or a frame of
        several tiles): read :meth:`raw` instead."""
        if self.expmap or self.spec.image.samples != 1:
            return None
        chunks = self._chunks()
        if chunks is None or not chunks.codec.compressed:
            return None
        grid = chunks.grid
        if (grid.tile_w, grid.tile_h) != (grid.width, grid.height):  # one tile, the frame
            return None
        lengths = self._live(layout.BYTES, frame)
        fd = self._reader_fd()
        planes = list(decode_pool().map(lambda k: chunks.tile_planes(fd, frame, 0, lengths[0], k),
                                        range(len(chunks.channels))))
        got = {c.name: p for c, p in zip(chunks.channels, planes, strict=True)}
        return PlanesFrame(frame, (grid.height, grid.width), got["iterations"], got["fraction"],
                           got.get("distance"))

    # ------------------------------------------------------------------ expmap units
    def unit(self, name: str, u: int) -> np.ndarray:
        """Channel ``name`` of rendered unit u as stored, (P, A) (filler included)."""
        return self.read(u, [name])[0]

    def strip_rows(self, first: int, stop: int) -> Raster:
        """Global strip rows ``first .. stop - 1`` of an expmap store, (rows, A)."""
        layout = self._layout()
        parts = [self.read(u, ["iterations", "fraction"], rows=slice(r0, r1))
                 for u, r0, r1, _ in layout.strip_blocks(first, stop)]
        if not parts:
            a = layout.geom.angles
            return Raster(np.zeros((0, a), np.uint32), np.zeros((0, a), np.float32), first)
        return Raster(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]),
                      first)

    def centre_image(self) -> Raster:
        """The centre image of an expmap store, (Hc, Wc), assembled from its pieces."""
        layout = self._layout()
        wc, hc = layout.geom.centre_size
        n = np.zeros((hc, wc), np.uint32)
        d = np.zeros((hc, wc), np.float32)
        for u, t, piece in layout.centre_tiles():
            tile = layout.grid.tile(t)
            rows = slice(tile.y0, tile.y0 + piece.height)
            cols = slice(tile.x0, tile.x0 + piece.width)
            at = (slice(piece.y0, piece.y0 + piece.height), slice(piece.x0, piece.x0 + piece.width))
            n[at], d[at] = self.read(u, ["iterations", "fraction"], rows, cols)
        return Raster(n, d)

    @property
    def layout(self) -> ExpmapLayout:
        """An expmap store's units and what each video frame reads (farm/plan/units.py),
        rebuilt from the stored frame depths: no arbitrary-precision arithmetic, once per
        process."""
        return self._synthesis().layout

    @property
    def bins(self) -> int:
        """Histogram length: the largest stored iteration limit + 1."""
        return int(self.file["frames/max_iter"][...].max()) + 1

    def _layout(self) -> ExpmapLayout:
        if not self.expmap:
            raise StoreError(f"store {self.path}: not an expmap store")
        return self.layout

    def _synthesis(self):
        """The process's synthesis of this store's frames (shared by every reader of the
        same file, farm/synth/engine.py; or the reader's own), looked up once per reader."""
        if self._synth is not None:
            return self._synth
        from farm.compute.synthesis import Synthesis, shared
        from farm.plan.units import layout_for

        stat = os.stat(self.path)
        key = (os.path.realpath(self.path), stat.st_dev, stat.st_ino,
               str(self.file.attrs.get("created")), self.spec_text)
        keep = 2 * self.spec.color.smoothing + 8

        def make() -> Synthesis:
            layout = layout_for(self.spec, self.file["video/depth"][...].tolist())
            return Synthesis(layout, self.file["video/max_iter"][...].tolist(), self.bins, keep=keep)
        self._synth = make() if self.own_synthesis else shared(key, make)
        return self._synth

    def _expmap_frame(self, frame: int) -> RawFrame:
        if not 0 <= frame < self.frames:
            raise StoreError(f"store {self.path}: frame {frame} of {self.frames}")
        lo, hi = self.layout.needs[frame]
        missing = np.flatnonzero(~self.unit_done()[lo:hi])
        if len(missing):
            raise StoreError(f"store {self.path}: frame {frame} needs unit {lo + missing[0]}, "
                             f"not rendered yet; run `farm resume {self.path}`")
        return self._synthesis().frame(frame, self.strip_rows, self.centre_image)

    # ------------------------------------------------------------------ progress
    def status(self, now: float | None = None) -> dict[str, Any]:
        """Progress, rate, ETA and per-rank balance of the latest run (for ``farm status``):
        farm/store/status.py."""
        return store_status(self, now)
