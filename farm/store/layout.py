"""The HDF5 store's layout, and its creation.

Every dataset is created, at its final size, when the store is created; a render
never changes HDF5 metadata afterwards. It only overwrites raw bytes at fixed
offsets (see :mod:`farm.store.writer`), so a process killed at any moment cannot
leave the file unreadable. The store is created under a temporary name and
renamed into place, so it exists complete or not at all.

Format 9 (this one) compresses the pixel channels: each chunk is shuffled and
compressed with zstd, through registered HDF5 filters, in a slot of fixed size
(farm/store/codec.py explains the slots and why the file stays sparse);
``output.compression = "none"`` keeps them raw, as format 8 did. Format 8 stores
(raw channels, no ``tiles/bytes``) are still read and resumed. A complete store is
compacted (farm/store/compact.py): rewritten with every chunk just its stored bytes,
end to end, and ``histogram`` chunked by 1024 bins of a row (only chunks with a count
stored); the same datasets, values and attributes.

Layout (F frames, H x W pixels, T tiles per frame, N = largest max_iter + 1)::

    /                       attrs: spec (canonical TOML), format, created, method
    iterations  uint32 (F, H, W)  escape counts; chunk = one tile (1, th, tw)
    fraction    float32 (F, H, W) smooth offset d: continuous count n + d
    (further per-pixel channels the plan asks for, farm/plan/channels.py, chunked alike;
    filters: shuffle, zstd (id 32015) when compressed; none when raw)
    done        uint8 (F, T)      1 when the tile's data above is durable
    histogram   int64 (F, N)      histogram[f, n] = pixels of frame f with count n
    frame_done  uint8 (F,)        1 when histogram[f] is written (all tiles done)
    frames/width       S40 (F,)   width as a decimal string (25 digits)
    frames/max_iter    int64 (F,)
    frames/precision   S16 (F,)   f64 | fp128 | quad-single | perturb
    tiles/seconds      float32 (F, T)  device time of the tile's kernel
    tiles/rank         int16 (F, T)    MPI rank that rendered it (0: in-process)
    tiles/run          int16 (F, T)    index into runs
    tiles/finished     float64 (F, T)  unix time the master received it
    tiles/crc          uint32 (F, T)   crc32 of the tile as stored: its compressed
                                       frames, channel after channel (compressed), or
                                       its channel bytes cropped to the tile (raw):
                                       iterations, fraction, then any further channels
    tiles/bytes        uint32 (F, T, C)  (compressed stores) each channel's stored
                                       frame length in bytes, C = channels
    reference/...    the reference points and orbits of perturbed frames (only when
                some frame is perturbed; farm/plan/references.py), R of them:
      reference/orbits  float64 (sum L, 2)  every orbit Z(0) .. Z(L-1), back to back:
                                            Z itself, or below 2^-960 its mantissa pair
      reference/orbit_exp  int32 (sum L,)   Z = orbits 2^orbit_exp (0: orbits holds Z)
      reference/starts  int64 (R + 1,)      orbit k is rows starts[k] .. starts[k+1] - 1
      reference/point   S (R, 2)            the reference c as decimal strings (re, im),
                                            exact at reference/bits bits
      reference/bits    int64 (R,)          precision of the point and its orbit
      reference/period  int64 (R,)          p > 0: a nucleus of period p, its orbit holds
                                            Z(0) .. Z(p) and pixels wrap at p; 0: none
      reference/kind    S16 (R,)            "nucleus" | "misiurewicz" | "center"
      reference/wrap    int64 (R,)          pixels go on from Z(wrap) after the orbit's
                                            last point: 0, or a Misiurewicz point's
                                            preperiod (its orbit: preperiod + one period)
      reference/log2_scale, reference/angle  float64 (R,)  lambda' = prod_{m=1}^{p-1}
                                            2 Z(m) = 2^log2_scale e^(i angle) (nucleus)
    frames/reference  int32 (F,)  index of each frame's reference, -1: not perturbed
    runs        (RUNS,) one row per render or resume: started, ended (unix time),
                workers, master_busy (seconds the master's loop spent receiving and
                deciding), writer_busy (seconds its writer thread spent writing),
                synced (unix time of the last fdatasync: everything before is on disk),
                master_receive (seconds the master spent inside MPI receives), and the
                run's timeline (farm/runtime/timeline.py): process_started, render_ended,
                video_ended (unix times), reference_s, gpu_s, setup_s, build_s, prep_s,
                send_s, idle_s (workers' sums), color_s, encode_s, video_frames

Chunks of edge tiles are full-sized; the part outside the image is zero. Storage
that was never written reads as zero (a new file's unwritten ranges are holes).

The expmap method (``method`` attribute ``"expmap"``, farm/plan/units.py) stores render
units instead of frames: the first axis of every dataset above is the unit (U units
of ``P x A`` pixels: H = P rows per octave, W = A angles), ``frame_done`` says which
units are complete, ``histogram`` counts a unit's stored pixels (filler included) and
``frames/width`` is the diameter of the disc a unit covers. Besides::

    units/kind      S8 (U,)     segment | centre
    units/number    int64 (U,)  segment j (0: innermost octave) or centre unit c
    video/width     S40 (F,)    each video frame's width (25 digits)
    video/max_iter  int64 (F,)  its iteration limit (synthesis counts later escapes
                                as interior)
    video/depth     float64 (F,) log2 of its pixel spacing over the deepest frame's:
                                with the spec, all a reader needs to rebuild the units'
                                layout (no arbitrary-precision arithmetic)

with the attribute ``expmap`` (JSON: angles, rows per octave, strip rows, centre
size, ...; informational, the plan recomputes it from the spec).
"""

from __future__ import annotations

import atexit
import contextlib
import datetime
import glob
import json
import os
import threading
from pathlib import Path

import h5py
import numpy as np

from farm.plan import Plan
from farm.plan.reference_pack import pack, unpack
from farm.plan.reference_types import References
from farm.spec import canonical_text
from farm.store.codec import FS_BLOCK, RAW, ZSTD, Codec, SparseWriter

FORMAT = "zoomfarm-store/9"  # bump when the layout changes: readers refuse others
READABLE = ("zoomfarm-store/8", FORMAT)  # formats this farm reads and resumes
BYTES = "tiles/bytes"  # (F, T, C) stored frame lengths of a compressed store
# The histogram row of one frame as the size estimate counts it, at most: a frame's
# counts lie between its first and its last escape, which at depth are far closer
# together than its limit (at 1e-10000 the depth rule's 10^7 against spans of a few
# thousand counts, benchmarks/depth.py); 2^20 bins is 8 MB a frame, as much as a
# compressed 1080p frame's pixels. A frame whose counts spread wider writes more, and
# the full-disk stop ends the render there, losing nothing (docs/store-guarantees.md).
ROW_ESTIMATE_BINS = 1 << 20
RUNS = 1024  # render and resume runs a store can record (the last row is reused after)
# One row per render or resume: when it ran, and its timeline (farm/runtime/timeline.py).
# Times are unix seconds; *_s fields are seconds of work (worker fields summed over
# the run's workers).
RUN_DTYPE = np.dtype([("started", "<f8"), ("workers", "<i4"), ("ended", "<f8"),
                      ("master_busy", "<f8"), ("writer_busy", "<f8"), ("synced", "<f8"),
                      ("master_receive", "<f8"),
                      ("process_started", "<f8"), ("render_ended", "<f8"), ("video_ended", "<f8"),
                      ("reference_s", "<f8"), ("gpu_s", "<f8"), ("setup_s", "<f8"),
                      ("build_s", "<f8"), ("prep_s", "<f8"), ("send_s", "<f8"), ("idle_s", "<f8"),
                      ("color_s", "<f8"), ("encode_s", "<f8"), ("video_frames", "<i4")])

# name -> (dtype, shape kind); shape kinds: "pixels" (F,H,W), "tiles" (F,T), "frames" (F,)
TILE_META = {
    "tiles/seconds": "<f4",
    "tiles/rank": "<i2",
    "tiles/run": "<i2",
    "tiles/finished": "<f8",
    "tiles/crc": "<u4",
}


def fixed(group: h5py.Group, name: str, shape: tuple[int, ...], dtype: str | np.dtype,
          chunks: tuple[int, ...] | None = None) -> h5py.Dataset:
    """A dataset whose storage is allocated now and never filled: raw writes go in place."""
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    if chunks:
        dcpl.set_chunk(chunks)
    else:
        dcpl.set_layout(h5py.h5d.CONTIGUOUS)
    dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
    dcpl.set_fill_time(h5py.h5d.FILL_TIME_NEVER)
    return group.create_dataset(name, shape=shape, dtype=dtype, dcpl=dcpl)


def _slotted(f: h5py.File, name: str, shape: tuple[int, ...], dtype: str, chunks: tuple[int, ...],
             codec: Codec) -> h5py.Dataset:
    """A chunked dataset with ``codec``'s filters and no chunk written yet."""
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_chunk(chunks)
    for code, values in codec.filters():
        dcpl.set_filter(code, h5py.h5z.FLAG_OPTIONAL, values)
    dcpl.set_fill_time(h5py.h5d.FILL_TIME_NEVER)
    return f.create_dataset(name, shape=shape, dtype=dtype, dcpl=dcpl)


def slot_templates(plan: Plan, codec: Codec) -> dict[str, bytes]:
    """Each channel's empty slot as written at creation: the stored frame of an all-zero
    chunk and the skippable header (the rest of the slot is zeros, left as a hole)."""
    th, tw = plan.grid.tile_h, plan.grid.tile_w
    out = {}
    for c in plan.channels:
        zero = np.zeros(c.shape(th, tw), c.dtype)
        out[c.name] = codec.stored(codec.encode(zero), codec.slot_bytes(c.nbytes(th * tw)))
    return out


def write_slots(f: h5py.File, plan: Plan, codec: Codec, heads: dict[str, bytes]) -> None:
    """Every chunk of every channel, frame after frame (a frame's channels lie together
    in the file), written at its slot's full size so that HDF5's index records it so."""
    th, tw = plan.grid.tile_h, plan.grid.tile_w
    full = {c.name: heads[c.name] + bytes(codec.slot_bytes(c.nbytes(th * tw)) - len(heads[c.name]))
            for c in plan.channels}
    ids = {c.name: f[c.name].id for c in plan.channels}
    corners = [(t.y0, t.x0) for t in plan.grid]
    extra = {c.name: (0,) * (c.depth > 1) for c in plan.channels}
    for frame in range(len(plan.frames)):
        for c in plan.channels:
            for y0, x0 in corners:
                ids[c.name].write_direct_chunk((frame, y0, x0, *extra[c.name]), full[c.name])


def create(path: str | os.PathLike[str], plan: Plan, refs: References | None = None,
           codec: Codec = ZSTD) -> None:
    """Create an empty store for ``plan`` at ``path`` (atomically; replaces nothing),
    with the references of its perturbed frames when there are some, its pixel
    channels encoded with ``codec``."""
    begin(path, plan, codec).finish(refs)


def begin(path: str | os.PathLike[str], plan: Plan, codec: Codec = ZSTD) -> NewStore:
    """Begin creating the store of :func:`create`: everything but the references,
    under a temporary name. ``finish(refs)`` then puts it in place, ``abort()``
    removes it. A new render writes the store's body so while its references are
    computed in a process of their own (farm/run/early_refs.py)."""
    return NewStore(Path(path), plan, codec)


def remove_stale(path: str | os.PathLike[str]) -> None:
    """Remove the temporaries ``.NAME.PID.tmp`` that creations of the store at ``path``
    left when they were killed (a creation waits for the references, which take minutes
    at great depths), the stores ``.NAME.PID.replaced`` that a killed ``--restart``
    had set aside (:func:`set_aside`) but not yet removed (this process's own is left to
    its thread), and the copies ``.NAME.PID.compact`` of killed compactions
    (farm/store/compact.py). Only for a caller that holds the store's lock
    (farm/store/lock.py): no other creation or compaction of it can be under way."""
    path = Path(path)
    for suffix in (".tmp", ".replaced", ".compact"):
        for left in path.parent.glob(f".{glob.escape(path.name)}.*{suffix}"):
            pid = left.name[len(path.name) + 2:-len(suffix)]
            if pid.isdigit() and int(pid) != os.getpid():
                with contextlib.suppress(FileNotFoundError):
                    left.unlink()


_removing: list[threading.Thread] = []


class Replaced:
    """A replaced store set aside (:func:`set_aside`), being removed on a thread."""

    def __init__(self, path: Path):
        self.path = path
        if not _removing:
            atexit.register(_wait_for_removals)
        self._thread = threading.Thread(target=self._remove, name="farm-remove-replaced", daemon=True)
        _removing.append(self._thread)
        self._thread.start()

    def _remove(self) -> None:
        with contextlib.suppress(OSError):
            self.path.unlink()

    def wait(self) -> None:
        """Return once the file is gone (its blocks are free space again)."""
        self._thread.join()


def set_aside(path: str | os.PathLike[str]) -> Replaced | None:
    """Move the store at ``path`` (a ``--restart`` replaces it) out of the way, to
    ``.NAME.PID.replaced`` beside it, and remove it on a thread of its own: freeing a
    large file's blocks takes the file system a while (0.69-0.87 s for a 2.5 GB store
    on an H100 host's disk), which was on the way to the first kernel. None where there
    was no store. The process waits for the removal before it exits; a process killed
    first leaves the file to the next creation's :func:`remove_stale`."""
    path = Path(path)
    aside = path.with_name(f".{path.name}.{os.getpid()}.replaced")
    try:
        os.replace(path, aside)
    except FileNotFoundError:
        return None
    return Replaced(aside)


def _wait_for_removals() -> None:
    for thread in _removing:
        thread.join()


class NewStore:
    """A store being created (:func:`begin`): the file ``.NAME.PID.tmp`` beside
    ``path``, open, with every dataset but the references written."""

    def __init__(self, path: Path, plan: Plan, codec: Codec):
        self.path, self.plan = path, plan
        path.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        self._open = contextlib.ExitStack()
        try:
            heads = slot_templates(plan, codec) if codec.compressed else {}
            th, tw = plan.grid.tile_h, plan.grid.tile_w
            slots = {codec.slot_bytes(c.nbytes(th * tw)): heads[c.name] for c in plan.channels if heads}
            sparse = self._open.enter_context(SparseWriter(self.tmp, slots))
            self._file = self._open.enter_context(h5py.File(sparse, "w", libver="earliest"))
            _write_body(self._file, plan, codec, heads)
        except BaseException:
            self.abort()
            raise

    def finish(self, refs: References | None) -> None:
        """Write the references (a plan with perturbed frames needs them), close the
        file, flush it to disk and rename it into place (never over an existing file)."""
        try:
            if self.plan.reference_needs() is not None:
                if refs is None:
                    raise ValueError("a plan with perturbed frames needs its references")
                write_references(self._file, refs)
            self._open.close()
            with open(self.tmp, "rb+") as fh:
                os.fsync(fh.fileno())
            if self.path.exists():
                raise FileExistsError(self.path)
            os.replace(self.tmp, self.path)
        finally:
            self.abort()  # after the rename: nothing left to remove

    def abort(self) -> None:
        """Close and remove the temporary file (nothing is left; closing a file that is
        being given up may fail too, on a full disk: that is not what went wrong)."""
        try:
            with contextlib.suppress(Exception):
                self._open.close()
        finally:
            with contextlib.suppress(FileNotFoundError):
                self.tmp.unlink()


def _write_body(f: h5py.File, plan: Plan, codec: Codec, heads: dict[str, bytes]) -> None:
    """Every dataset of a new store but the references (see the module docstring)."""
    spec = plan.spec
    w, h = plan.grid.width, plan.grid.height  # a frame, or an expmap unit
    tw, th = plan.grid.tile_w, plan.grid.tile_h
    f_count, t_count = len(plan.frames), plan.grid.count
    f.attrs["spec"] = canonical_text(spec)
    f.attrs["format"] = FORMAT
    f.attrs["created"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    f.attrs["method"] = plan.method
    for c in plan.channels:  # iterations, fraction, then any others
        shape = (f_count, *c.shape(h, w))
        if codec.compressed:
            _slotted(f, c.name, shape, c.dtype, (1, *c.shape(th, tw)), codec)
        else:
            fixed(f, c.name, shape, c.dtype, chunks=(1, *c.shape(th, tw)))
    if codec.compressed:
        write_slots(f, plan, codec, heads)
        fixed(f, BYTES, (f_count, t_count, len(plan.channels)), "<u4")
    fixed(f, "done", (f_count, t_count), "u1")
    fixed(f, "histogram", (f_count, plan.bins), "<i8")
    fixed(f, "frame_done", (f_count,), "u1")
    for name, dtype in TILE_META.items():
        fixed(f, name, (f_count, t_count), dtype)
    fixed(f, "runs", (RUNS,), RUN_DTYPE)
    f["frames/width"] = np.array([_width_text(fr.width) for fr in plan.frames], "S40")
    f["frames/max_iter"] = np.array([fr.max_iter for fr in plan.frames], "<i8")
    f["frames/precision"] = np.array([fr.precision for fr in plan.frames], "S16")
    if plan.layout is not None:
        _expmap_datasets(f, plan)


def _expmap_datasets(f: h5py.File, plan: Plan) -> None:
    """The expmap store's unit and video-frame tables, and its geometry attribute."""
    layout = plan.layout
    assert layout is not None
    geom = layout.geom
    f["units/kind"] = np.array([u.kind for u in layout.units], "S8")
    f["units/number"] = np.array([u.number for u in layout.units], "<i8")
    f["video/width"] = np.array([_width_text(fr.width) for fr in plan.video], "S40")
    f["video/max_iter"] = np.array([fr.max_iter for fr in plan.video], "<i8")
    f["video/depth"] = np.array(geom.depths, "<f8")
    f.attrs["expmap"] = json.dumps({
        "angles": geom.angles, "rows_per_octave": geom.rows_per_octave, "rows": geom.rows,
        "segments": geom.segments, "l_base": geom.l_base, "centre_size": list(geom.centre_size),
        "centre_oversample": geom.centre_oversample, "oversample": geom.oversample,
        "blend": geom.blend, "zoom_in": layout.zoom_in, "centre_pieces": len(layout.pieces)})


def write_references(f: h5py.File, refs: References) -> None:
    """The ``reference/*`` datasets and ``frames/reference`` (see the module docstring)."""
    meta, orbits = pack(refs)
    f["reference/orbits"] = orbits.astype("<f8")
    f["reference/starts"] = np.array(meta["starts"], "<i8")
    f["reference/point"] = np.array(list(zip(meta["re"], meta["im"], strict=True)), dtype="S")
    f["reference/bits"] = np.array(meta["bits"], "<i8")
    f["reference/period"] = np.array(meta["period"], "<i8")
    f["reference/kind"] = np.array(meta["kind"], "S16")
    f["reference/log2_scale"] = np.array(meta["log2_scale"], "<f8")
    f["reference/angle"] = np.array(meta["angle"], "<f8")
    f["reference/orbit_exp"] = meta["exps"].astype("<i4")
    f["reference/wrap"] = np.array(meta["wrap"], "<i8")
    f["frames/reference"] = np.array(meta["frame_ref"], "<i4")


def read_references(f: h5py.File) -> References | None:
    """What :func:`write_references` wrote, or None when the store has no references."""
    if "reference/orbits" not in f:
        return None
    points = f["reference/point"][...]
    meta = {
        "re": [p[0].decode() for p in points], "im": [p[1].decode() for p in points],
        "bits": f["reference/bits"][...].tolist(), "period": f["reference/period"][...].tolist(),
        "kind": [k.decode() for k in f["reference/kind"][...]],
        "log2_scale": f["reference/log2_scale"][...].tolist(),
        "angle": f["reference/angle"][...].tolist(),
        "starts": f["reference/starts"][...].tolist(),
        "frame_ref": f["frames/reference"][...].tolist(),
    }
    if "reference/orbit_exp" in f:  # (stores before them: doubles, every orbit wraps to 0)
        meta["exps"] = f["reference/orbit_exp"][...]
        meta["wrap"] = f["reference/wrap"][...].tolist()
    return unpack(meta, f["reference/orbits"][...])


def store_bytes(plan: Plan, codec: Codec = RAW, orbit_length: int | None = None,
                apparent: bool = False) -> int:
    """Bytes the store takes on disk once every tile is written: the pixel channels in
    full chunks (edge tiles padded; compressed: an estimate, Codec.estimate), the
    per-frame histograms (each row up to its frame's limit) and bookkeeping, the
    reference orbit and the run table (HDF5's own metadata, a few kilobytes, is left
    out). The file is sparse until tiles arrive, so this is what the render will fill;
    compacted, the store's length too. ``apparent``: the file's length while it renders
    instead (a compressed store's chunks have slots of their largest size)."""
    grid, f_count = plan.grid, len(plan.frames)
    tile_px = grid.tile_w * grid.tile_h

    def chunk(c) -> int:
        return codec.slot_bytes(c.nbytes(tile_px)) if apparent else codec.estimate(c, tile_px)

    total = sum(f_count * grid.count * chunk(c) for c in plan.channels)
    if apparent:
        total += f_count * plan.bins * 8  # the histogram rows in full
    else:  # a row is written from its first to its last count that is not zero
        # (StoreWriter._write_histograms), all at most the frame's limit, counted here up
        # to ROW_ESTIMATE_BINS; the rest stays a hole (a resume that rebuilds a part-done
        # frame's row writes it whole)
        total += sum(8 * min(f.max_iter + 1, ROW_ESTIMATE_BINS) + FS_BLOCK for f in plan.frames)
    total += f_count  # frame_done
    per_tile = 1 + sum(np.dtype(d).itemsize for d in TILE_META.values())  # done + tiles/*
    if codec.compressed:
        per_tile += 4 * len(plan.channels)  # tiles/bytes
    total += f_count * grid.count * per_tile
    total += f_count * (40 + 8 + 16)  # frames/width, max_iter, precision
    if plan.layout is not None:
        total += f_count * (8 + 8) + len(plan.video) * (40 + 8 + 8)  # units/*, video/*
    needs = plan.reference_needs()
    if needs is not None:  # the orbits (a nucleus' is one period: this bounds them) and refs
        total += 20 * (orbit_length or needs[1] + 1) + 4 * f_count  # mantissas (16) and exponent (4)
    return total + RUNS * RUN_DTYPE.itemsize


def foreign(path: str | os.PathLike[str]) -> str | None:
    """None if ``path`` is a store some version of this farm wrote; otherwise what it is
    ("an empty file", "not an HDF5 file", "an HDF5 file of another program"), for an
    error that leaves it alone."""
    path = Path(path)
    try:
        if path.stat().st_size == 0:
            return "an empty file"
        if not h5py.h5f.is_hdf5(os.fsencode(path)):
            return "not an HDF5 file"
        with h5py.File(path, "r", locking=False) as f:
            found = f.attrs.get("format")
    except OSError as err:
        return f"a file that cannot be read as HDF5 ({err.strerror or err})"
    if isinstance(found, bytes):
        found = found.decode("utf-8", "replace")
    if isinstance(found, str) and found.startswith("zoomfarm-store/"):
        return None
    return "an HDF5 file of another program"


def check_ours(path: str | os.PathLike[str], field: str) -> None:
    """StoreError (exit 2, the file untouched) if something other than a store this farm
    wrote is at ``path``: resuming or replacing (--restart) it would destroy it."""
    from farm.errors import StoreError

    path = Path(path)
    if not path.exists():
        return
    if not path.is_file():
        raise StoreError(f"{field}: {path} exists and is not a file; choose another --store")
    problem = foreign(path)
    if problem:
        raise StoreError(f"{field}: {path} is {problem}, not a zoomfarm store; it is left as it is: "
                         "move it away or choose another --store")


def _width_text(width: object) -> str:
    import farm.numerics as num

    return num.decimal_text(width, 25)


def offsets(f: h5py.File) -> dict[str, int]:
    """Byte offset of every contiguous dataset (where raw writes go; a compacted store's
    histogram is chunked and has none: farm/store/compact.py); StoreError if one is not
    contiguous and allocated (a repacked store: readable, not resumable)."""
    from farm.errors import StoreError

    rows = ["histogram"] if f["histogram"].chunks is None else []
    names = ["done", *rows, "frame_done", "runs", *TILE_META, *([BYTES] if BYTES in f else [])]
    out = {n: f[n].id.get_offset() for n in names}
    missing = [n for n, off in out.items() if off is None]
    if missing:
        raise StoreError(f"{f.filename}: {', '.join(missing)} not stored in place "
                         "(repacked?); it can be read, not resumed")
    return out

