"""The HDF5 store: layout, tile writes (compressed and raw) read back by h5py and by the
farm's own reader, histograms, resume aids."""

from __future__ import annotations

import h5py
import hdf5plugin  # noqa: F401 (registers the zstd filter: h5py reads compressed stores)
import numpy as np
import pytest
from conftest import make_spec

from farm import spec as specmod
from farm.errors import StoreError
from farm.plan import make_plan
from farm.store import layout
from farm.store.codec import RAW, ZSTD, pack, shuffle
from farm.store.reader import Store
from farm.store.writer import Finished, StoreWriter

CODECS = pytest.mark.parametrize("codec", [ZSTD, RAW], ids=["zstd", "raw"])


def _plan(frames=3):
    return make_plan(make_spec(size=(40, 23), frames=frames, width=("3", "0.5"), tile=(16, 16),
                               max_iter=100))


def _fake_tile(plan, f, t, seed, codec=ZSTD):
    """A tile of made-up counts packed as a worker packs it, with the histogram the
    device would send; returns (Finished, iterations, fraction)."""
    tile = plan.grid.tile(t)
    rng = np.random.default_rng(seed)
    it = rng.integers(0, plan.frames[f].max_iter + 1, (tile.height, tile.width)).astype(np.uint32)
    it[: tile.height // 2] //= 7  # runs and repeats, as real counts have
    fr = rng.random((tile.height, tile.width), dtype=np.float32)
    counts = np.bincount(it.ravel())
    bins = np.flatnonzero(counts)
    packed = pack(codec, [it, fr], (tile.height, tile.width), (plan.grid.tile_h, plan.grid.tile_w))
    return Finished(f, t, packed.payloads, bins.astype(np.int64), counts[bins].astype(np.int64), 0.01,
                    1, packed.crc), it, fr


@CODECS
def test_layout(tmp_path, codec):
    plan = _plan()
    path = tmp_path / "s.h5"
    layout.create(path, plan, codec=codec)
    with h5py.File(path, "r") as f:
        assert f["iterations"].shape == (3, 23, 40) and f["iterations"].dtype == np.uint32
        assert f["iterations"].chunks == (1, 16, 16)
        assert f["fraction"].dtype == np.float32
        assert f["done"].shape == (3, plan.grid.count)
        assert f["histogram"].shape == (3, plan.bins) and f["histogram"].dtype == np.int64
        assert not f["done"][...].any() and not f["frame_done"][...].any()
        assert specmod.parse_text(f.attrs["spec"]) == plan.spec
        assert list(f["frames/max_iter"][...]) == [fr.max_iter for fr in plan.frames]
        assert not f["iterations"][...].any() and not f["fraction"][...].any()  # empty slots read as 0
        assert (layout.BYTES in f) == codec.compressed
    assert not list(tmp_path.glob(".*tmp"))  # created under a temporary name, renamed


def test_a_store_begun_is_hidden_until_finished_and_aborting_leaves_nothing(tmp_path):
    """layout.begin writes everything but the references under a temporary name;
    finish puts the file in place (the datasets as create makes them), never over an
    existing file; abort, or a plan with perturbed frames finished without
    references, leaves nothing behind."""
    plan = _plan()
    path, other = tmp_path / "s.h5", tmp_path / "c.h5"
    new = layout.begin(path, plan)
    assert not path.exists() and new.tmp.exists() and new.tmp.parent == tmp_path
    new.finish(None)
    assert path.exists() and not list(tmp_path.glob(".*tmp"))
    layout.create(other, plan)
    with h5py.File(path, "r") as a, h5py.File(other, "r") as b:
        names = _names(a)
        assert sorted(names) == sorted(_names(b))
        for name in names:
            if isinstance(a[name], h5py.Dataset):
                assert np.array_equal(a[name][...], b[name][...]), name

    layout.begin(tmp_path / "gone.h5", plan).abort()
    again = layout.begin(path, plan)  # the store is there: finish refuses to replace it
    with pytest.raises(FileExistsError):
        again.finish(None)
    assert not list(tmp_path.glob(".*tmp")) and not (tmp_path / "gone.h5").exists()

    deep = make_plan(make_spec(size=(32, 16), width=("1e-20", "1e-20"), center=("-0.75", "0.1")))
    assert deep.reference_needs() is not None
    with pytest.raises(ValueError, match="references"):
        layout.begin(tmp_path / "deep.h5", deep).finish(None)
    assert not list(tmp_path.glob("*deep*")) and not list(tmp_path.glob(".*tmp"))


def _names(f: h5py.File) -> list[str]:
    out: list[str] = []
    f.visit(out.append)
    return out


@CODECS
def test_tiles_round_trip_through_h5py_and_the_reader(tmp_path, codec):
    plan = _plan()
    path = tmp_path / "s.h5"
    layout.create(path, plan, codec=codec)
    tiles = {(f, t): _fake_tile(plan, f, t, 10 * f + t, codec) for f in range(3)
             for t in range(plan.grid.count)}
    with StoreWriter(path, plan) as w:
        assert w.codec == codec
        completed = w.write([tiles[(0, t)][0] for t in range(plan.grid.count)])
        assert completed == [0]
        w.write([tiles[(1, 0)][0], tiles[(2, 5)][0]])
    with Store(path) as s, h5py.File(path, "r") as f:  # the farm's reader, and plain h5py
        done = s.done()
        assert done[0].all() and done[1, 0] and done[2, 5] and done.sum() == plan.grid.count + 2
        assert list(s.frame_done()) == [True, False, False]
        it0, fr0 = s.iterations(0), s.fraction(0)
        assert np.array_equal(it0, f["iterations"][0]) and np.array_equal(fr0, f["fraction"][0])
        for t in range(plan.grid.count):
            tile = plan.grid.tile(t)
            sl = np.s_[tile.y0:tile.y0 + tile.height, tile.x0:tile.x0 + tile.width]
            assert np.array_equal(it0[sl], tiles[(0, t)][1])
            assert np.array_equal(fr0[sl].view(np.uint32), tiles[(0, t)][2].view(np.uint32))  # bits
        tile = plan.grid.tile(5)  # a block across tiles, as the expmap reader asks for
        block = s.read(2, ["fraction", "iterations"], slice(3, 30), slice(10, 39))
        assert np.array_equal(block[1], f["iterations"][2, 3:30, 10:39])
        assert np.array_equal(block[0][tile.y0 - 3:, tile.x0 - 10:], tiles[(2, 5)][2][:, :39 - tile.x0])
        assert not block[0][:tile.y0 - 3].any()  # tiles not rendered read as zeros
        hist = s.histogram(0)
        assert np.array_equal(hist, np.bincount(it0.ravel(), minlength=plan.bins))
        status = s.status()
        assert status["tiles_done"] == plan.grid.count + 2 and status["frames_complete"] == 1


@CODECS
def test_a_frame_of_one_tile_reads_as_the_planes_of_its_channels(tmp_path, codec):
    """Store.planes: a compressed store's frame of one tile as its channels' byte planes,
    the shuffle of what Store.raw gives (a written frame and one never written, zeros);
    None where the frame has several tiles or the store is not compressed."""
    plan = make_plan(make_spec(size=(21, 13), frames=2, width=("3", "0.5"), tile=(32, 32), max_iter=100))
    assert plan.grid.count == 1
    path = tmp_path / "one.h5"
    layout.create(path, plan, codec=codec)
    finished, it, fr = _fake_tile(plan, 0, 0, 7, codec)
    with StoreWriter(path, plan) as w:
        w.write([finished])
    with Store(path) as s:
        if not codec.compressed:
            assert s.planes(0) is None
            return
        for f in (0, 1):
            raw, planes = s.raw(f), s.planes(f)
            assert planes is not None and planes.shape == (13, 21) and planes.distance is None
            assert np.array_equal(planes.iterations, shuffle(raw.iterations).ravel())
            assert np.array_equal(planes.fraction, shuffle(raw.fraction).ravel())
        assert np.array_equal(s.raw(0).iterations, it) and not s.planes(1).iterations.any()
    several = tmp_path / "several.h5"
    layout.create(several, _plan(), codec=codec)
    with Store(several) as s:
        assert s.planes(0) is None


def test_compressed_store_is_smaller_on_disk(tmp_path):
    """Slots are sparse: the file's blocks hold the compressed tiles, not the raw size."""
    plan = make_plan(make_spec(size=(256, 256), frames=4, width=("3", "0.5"), tile=(128, 128), max_iter=100))
    sizes = {}
    for codec in (ZSTD, RAW):
        path = tmp_path / f"{codec.name}.h5"
        layout.create(path, plan, codec=codec)
        with StoreWriter(path, plan) as w:
            for f in range(4):
                w.write([_smooth_tile(plan, f, t, codec) for t in range(plan.grid.count)])
        sizes[codec.name] = path.stat().st_blocks * 512
    assert sizes["zstd"] * 3 < sizes["none"], sizes


def _smooth_tile(plan, f, t, codec):
    """Counts and offsets that vary slowly across the tile, as a render's do."""
    tile = plan.grid.tile(t)
    y, x = np.mgrid[0:tile.height, 0:tile.width]
    it = (50 + (x + y + 40 * f) // 9).astype(np.uint32)
    fr = ((x * 0.37 + y * 0.11) % 1).astype(np.float32)
    packed = pack(codec, [it, fr], (tile.height, tile.width), (plan.grid.tile_h, plan.grid.tile_w))
    counts = np.bincount(it.ravel())
    bins = np.flatnonzero(counts)
    return Finished(f, t, packed.payloads, bins, counts[bins].astype(np.int64), 0.01, 1, packed.crc)


@CODECS
def test_histogram_restored_after_restart_counts_each_tile_once(tmp_path, codec):
    plan = _plan(frames=1)
    path = tmp_path / "s.h5"
    layout.create(path, plan, codec=codec)
    tiles = [_fake_tile(plan, 0, t, t, codec)[0] for t in range(plan.grid.count)]
    half = plan.grid.count // 2
    with StoreWriter(path, plan) as w:
        w.write(tiles[:half])
    with StoreWriter(path, plan) as w:  # a resume: the sums of the first half are gone
        assert w.restore_histograms() == []
        assert w.pending() == [(0, t) for t in range(half, plan.grid.count)]
        w.write(tiles[half - 1:])  # the repeat of an already-done tile is ignored
    with Store(path) as s:
        assert s.frame_done()[0]
        assert np.array_equal(s.histogram(0), np.bincount(s.iterations(0).ravel(), minlength=plan.bins))


@CODECS
def test_killed_between_tiles_and_histogram_is_completed(tmp_path, codec):
    plan = _plan(frames=1)
    path = tmp_path / "s.h5"
    layout.create(path, plan, codec=codec)
    with StoreWriter(path, plan) as w:
        w.write([_fake_tile(plan, 0, t, t, codec)[0] for t in range(plan.grid.count)])
        fd_off = w.offsets["frame_done"]
    with open(path, "r+b") as fh:  # as if killed before the frame_done byte
        fh.seek(fd_off)
        fh.write(b"\x00")
    with StoreWriter(path, plan) as w:
        assert w.restore_histograms() == [0]
    with Store(path) as s:
        assert s.frame_done()[0]
        assert np.array_equal(s.histogram(0), np.bincount(s.iterations(0).ravel(), minlength=plan.bins))


@CODECS
def test_verify_finds_damaged_tiles(tmp_path, codec):
    plan = _plan(frames=1)
    path = tmp_path / "s.h5"
    layout.create(path, plan, codec=codec)
    with StoreWriter(path, plan) as w:
        w.write([_fake_tile(plan, 0, t, t, codec)[0] for t in range(plan.grid.count)])
        offset = int(w.chunks.slots["iterations"][0, 3])
    with open(path, "r+b") as fh:
        fh.seek(offset + 8)
        fh.write(b"\xde\xad")
    with StoreWriter(path, plan) as w:
        assert w.verify() == [(0, 3)]
        assert w.pending() == [(0, 3)] and not w.frame_done[0]


def test_reader_rejects_non_stores(tmp_path):
    with pytest.raises(StoreError, match="does not exist"):
        Store(tmp_path / "missing.h5")
    junk = tmp_path / "junk.h5"
    junk.write_text("not hdf5")
    with pytest.raises(StoreError, match="not a readable HDF5"):
        Store(junk)
    other = tmp_path / "other.h5"
    with h5py.File(other, "w") as f:
        f["x"] = 1
    with pytest.raises(StoreError, match="not a zoomfarm store"):
        Store(other)


def test_a_repacked_store_is_read_but_not_resumed(tmp_path):
    """h5repack with compression moves and shrinks chunks: writing tiles in place would
    corrupt it, so the writer refuses (one clear error) while readers still work."""
    plan = _plan(frames=1)
    path = tmp_path / "s.h5"
    layout.create(path, plan)
    with StoreWriter(path, plan) as w:
        w.write([_fake_tile(plan, 0, t, t)[0] for t in range(plan.grid.count)])
    packed = tmp_path / "packed.h5"
    with h5py.File(path) as src, h5py.File(packed, "w") as dst:
        for key, value in src.attrs.items():
            dst.attrs[key] = value

        def copy(name, obj):  # visititems stops at the first callback that returns a value
            if isinstance(obj, h5py.Dataset):
                dst.create_dataset(name, data=obj[...], compression="gzip", chunks=True)

        src.visititems(copy)
    with Store(packed) as s, Store(path) as original:
        assert s.frame_done()[0]
        assert np.array_equal(s.iterations(0), original.iterations(0))  # read through h5py
    with pytest.raises(StoreError, match="not resumed"):
        StoreWriter(packed, plan)


def test_sync_soon_puts_the_store_on_disk_before_close(tmp_path):
    """The master asks for a sync when the last tile is written (the video's tail then
    overlaps it): the syncer records it without waiting for its period or for close."""
    import time

    plan = _plan()
    path = tmp_path / "s.h5"
    layout.create(path, plan, codec=ZSTD)
    with StoreWriter(path, plan, sync_every=3600) as w:
        w.write([_fake_tile(plan, 0, t, t)[0] for t in range(plan.grid.count)])
        assert w._run_row["synced"] == 0  # no period has passed
        w.sync_soon()
        for _ in range(600):  # the syncer looks every 0.25 s
            if w._run_row["synced"] > 0:
                break
            time.sleep(0.05)
        assert w._run_row["synced"] > 0  # recorded by the syncer, before close


def test_the_size_estimate_bounds_a_rendered_store_and_is_not_far_above_it(write_job):
    """`farm validate`'s store size (layout.store_bytes) against what a rendered store
    takes on disk: at least that (less HDF5's own metadata, left out of the estimate),
    and at most twice it. An auto zoom whose limits grow frame by frame: each histogram
    row is written up to its own frame's limit, not the longest (the estimate counted
    every row at the longest: 5.4x this store)."""
    from conftest import run_farm

    from farm.store import space

    seahorse = ("-0.743643887037158704752191506114774", "0.131825904205311970493132056385139")
    job = write_job("est", size=(64, 36), center=seahorse, width=("3", "1e-9"), frames=12,
                    max_iter="auto", tile=(64, 36))
    store = job.with_suffix(".h5")
    result = run_farm("render", str(job), "--no-video", "--quiet")
    assert result.returncode == 0, result.stderr
    with Store(store) as s:
        plan = s.plan()
    limits = [f.max_iter for f in plan.frames]
    assert max(limits) > 10 * min(limits)  # rows of very different lengths
    on_disk, estimate = space.allocated(store), layout.store_bytes(plan, ZSTD)
    assert on_disk <= estimate + 64 * 1024
    assert estimate <= 2 * on_disk, (estimate, on_disk)


def test_row_sums_of_sparse_tiles_equal_the_dense_sum():
    """The writer's histogram sum (RowSum) of tiles whose counts lie in different,
    overlapping ranges equals the dense sum, and writes from the first to the last
    count: tiles arrive below, above and inside what was summed before."""
    from farm.store.writer import RowSum

    rng = np.random.default_rng(7)
    dense, acc = np.zeros(5000, np.int64), RowSum()
    for lo, hi in [(2000, 2100), (3000, 3500), (100, 150), (2050, 4999), (0, 1), (120, 3000)]:
        counts = np.bincount(rng.integers(lo, hi + 1, 300), minlength=5000)
        bins = np.flatnonzero(counts)
        dense += counts
        acc.add(bins, counts[bins])
        nz = np.flatnonzero(dense)
        assert acc.lo == nz[0] and acc.lo + len(acc.counts) == nz[-1] + 1
        assert np.array_equal(acc.full(5000), dense)
    empty = RowSum()
    empty.add(np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert len(empty.counts) == 0 and not empty.full(10).any()


def test_a_deep_frames_row_is_read_from_what_was_written(write_job, monkeypatch):
    """Frames whose limit is 10^7 (a deep zoom's depth rule) but whose pixels escape
    within a few counts of each other: colouring reads each histogram row up to its
    last count from the ranges the writer wrote (kilobytes, not the row's 80 MB), gets
    the row's values, and gets them too where the file system cannot tell holes from
    data; the size estimate counts such a row at most ROW_ESTIMATE_BINS."""
    import os

    from conftest import run_farm

    from farm.store import space
    from farm.store import sparse_rows as reader_mod

    job = write_job("deep", size=(64, 36), center=("0.3", "0.6"), width=("0.01", "0.005"), frames=2,
                    max_iter=10_000_000, tile=(64, 36))
    store = job.with_suffix(".h5")
    result = run_farm("render", str(job), "--no-video", "--quiet")
    assert result.returncode == 0, result.stderr
    read = []
    real_pread = os.pread
    monkeypatch.setattr(reader_mod.os, "pread", lambda fd, n, at: read.append(n) or real_pread(fd, n, at))
    with Store(store) as s:
        assert s.bins == 10_000_001
        for f in range(2):
            read.clear()
            prefix = s.histogram(f, full=False)
            assert sum(read) < 1 << 20  # a row is 80 MB
            whole = s.histogram(f)
            assert prefix[-1] > 0 and len(prefix) < 1000 and np.array_equal(prefix, whole[:len(prefix)])
            assert not whole[len(prefix):].any() and whole.sum() == 64 * 36
            assert np.array_equal(s.raw(f).histogram, prefix)
            with monkeypatch.context() as m:
                m.setattr(reader_mod, "data_ranges", lambda fd, a, b: None)
                assert np.array_equal(s.histogram(f, full=False), prefix)
        plan = s.plan()
    on_disk, estimate = space.allocated(store), layout.store_bytes(plan, ZSTD)
    assert on_disk <= estimate + 64 * 1024
    assert estimate < 2 * 8 * (layout.ROW_ESTIMATE_BINS + 4096) + (1 << 20), estimate
