"""The HDF5 store: layout, raw tile writes read back by h5py, histograms, resume aids."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
from conftest import make_spec

from farm import spec as specmod
from farm.errors import StoreError
from farm.plan import make_plan
from farm.store import layout
from farm.store.reader import Store
from farm.store.writer import Finished, StoreWriter, tile_crc


def _plan(frames=3):
    return make_plan(make_spec(size=(40, 23), frames=frames, width=("3", "0.5"), tile=(16, 16),
                               max_iter=100))


def _fake_tile(plan, f, t, seed):
    """A tile of made-up counts, with the histogram the device would send."""
    tile = plan.grid.tile(t)
    rng = np.random.default_rng(seed)
    it = rng.integers(0, plan.frames[f].max_iter + 1, (tile.height, tile.width)).astype(np.uint32)
    fr = rng.random((tile.height, tile.width), dtype=np.float32)
    counts = np.bincount(it.ravel())
    bins = np.flatnonzero(counts)
    return Finished(f, t, {"iterations": it, "fraction": fr}, bins.astype(np.int64),
                    counts[bins].astype(np.int64), 0.01, 1, tile_crc(it, fr))


def test_layout(tmp_path):
    plan = _plan()
    path = tmp_path / "s.h5"
    layout.create(path, plan)
    with h5py.File(path, "r") as f:
        assert f["iterations"].shape == (3, 23, 40) and f["iterations"].dtype == np.uint32
        assert f["iterations"].chunks == (1, 16, 16)
        assert f["fraction"].dtype == np.float32
        assert f["done"].shape == (3, plan.grid.count)
        assert f["histogram"].shape == (3, plan.bins) and f["histogram"].dtype == np.int64
        assert not f["done"][...].any() and not f["frame_done"][...].any()
        assert specmod.parse_text(f.attrs["spec"]) == plan.spec
        assert list(f["frames/max_iter"][...]) == [fr.max_iter for fr in plan.frames]
    assert not list(tmp_path.glob(".*tmp"))  # created under a temporary name, renamed


def test_tiles_round_trip_through_h5py(tmp_path):
    plan = _plan()
    path = tmp_path / "s.h5"
    layout.create(path, plan)
    tiles = {(f, t): _fake_tile(plan, f, t, 10 * f + t) for f in range(3) for t in range(plan.grid.count)}
    with StoreWriter(path, plan) as w:
        completed = w.write([tiles[(0, t)] for t in range(plan.grid.count)])
        assert completed == [0]
        w.write([tiles[(1, 0)], tiles[(2, 5)]])
    with Store(path) as s:
        done = s.done()
        assert done[0].all() and done[1, 0] and done[2, 5] and done.sum() == plan.grid.count + 2
        assert list(s.frame_done()) == [True, False, False]
        it0, fr0 = s.iterations(0), s.fraction(0)
        for t in range(plan.grid.count):
            tile = plan.grid.tile(t)
            sl = np.s_[tile.y0:tile.y0 + tile.height, tile.x0:tile.x0 + tile.width]
            assert np.array_equal(it0[sl], tiles[(0, t)].iterations)
            assert np.array_equal(fr0[sl], tiles[(0, t)].fraction)
        hist = s.histogram(0)
        assert np.array_equal(hist, np.bincount(it0.ravel(), minlength=plan.bins))
        status = s.status()
        assert status["tiles_done"] == plan.grid.count + 2 and status["frames_complete"] == 1


def test_histogram_restored_after_restart_counts_each_tile_once(tmp_path):
    plan = _plan(frames=1)
    path = tmp_path / "s.h5"
    layout.create(path, plan)
    tiles = [_fake_tile(plan, 0, t, t) for t in range(plan.grid.count)]
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


def test_killed_between_tiles_and_histogram_is_completed(tmp_path):
    plan = _plan(frames=1)
    path = tmp_path / "s.h5"
    layout.create(path, plan)
    with StoreWriter(path, plan) as w:
        w.write([_fake_tile(plan, 0, t, t) for t in range(plan.grid.count)])
        fd_off = w.offsets["frame_done"]
    with open(path, "r+b") as fh:  # as if killed before the frame_done byte
        fh.seek(fd_off)
        fh.write(b"\x00")
    with StoreWriter(path, plan) as w:
        assert w.restore_histograms() == [0]
    with Store(path) as s:
        assert s.frame_done()[0]
        assert np.array_equal(s.histogram(0), np.bincount(s.iterations(0).ravel(), minlength=plan.bins))


def test_verify_finds_damaged_tiles(tmp_path):
    plan = _plan(frames=1)
    path = tmp_path / "s.h5"
    layout.create(path, plan)
    with StoreWriter(path, plan) as w:
        w.write([_fake_tile(plan, 0, t, t) for t in range(plan.grid.count)])
        offset = int(w.chunks["iterations"][0, 3])
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
        w.write([_fake_tile(plan, 0, t, t) for t in range(plan.grid.count)])
    packed = tmp_path / "packed.h5"
    with h5py.File(path) as src, h5py.File(packed, "w") as dst:
        for key, value in src.attrs.items():
            dst.attrs[key] = value

        def copy(name, obj):  # visititems stops at the first callback that returns a value
            if isinstance(obj, h5py.Dataset):
                dst.create_dataset(name, data=obj[...], compression="gzip", chunks=True)

        src.visititems(copy)
    with Store(packed) as s:
        assert s.frame_done()[0]
    with pytest.raises(StoreError, match="not resumed"):
        StoreWriter(packed, plan)
