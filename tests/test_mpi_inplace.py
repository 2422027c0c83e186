"""Workers that write their tiles into the store themselves (farm/store/inplace.py,
farm/store/shared.py): the token that tells them they see the master's store, a tile
written in place read back as the master's writer writes it, the fallback over MPI, and
kill -9 of a worker while it writes and of the master while the workers write, each
resumed to the one-process store."""

from __future__ import annotations

import os
import signal
import sys
import time

import h5py
import numpy as np
import pytest
from conftest import make_spec, run, run_farm, wait_for_tiles
from test_mpi import MPIEXEC, _rank_pid, assert_same_store, mpi_farm, mpi_start

from farm.errors import StoreError
from farm.plan import make_plan
from farm.store import layout, shared
from farm.store.codec import ZSTD, pack
from farm.store.inplace import SlotWriter
from farm.store.writer import Finished, StoreWriter

pytestmark = pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec")


# ---------------------------------------------------------------------------- no MPI


def test_a_worker_writes_in_place_only_where_it_reads_the_masters_token(tmp_path, monkeypatch):
    store = tmp_path / "s.h5"
    store.write_bytes(b"x" * 100)
    monkeypatch.delenv(shared.KNOB, raising=False)
    offer = shared.offer(store)
    assert offer is not None and offer.length == 100 and shared.token_path(store).exists()
    assert shared.check(offer) is None  # the same file system: the same token
    shared.token_path(store).write_text("another render's token")  # another host's file
    assert "not the master's" in shared.check(offer)
    shared.withdraw(store)
    assert not shared.token_path(store).exists()
    assert "cannot be read" in shared.check(offer)  # a host without the file at that path
    assert shared.check(None) is not None  # the master offered nothing
    monkeypatch.setenv(shared.KNOB, "0")
    assert shared.offer(store) is None  # on rank 0: off for every worker
    monkeypatch.delenv(shared.KNOB)
    offer = shared.offer(store)
    monkeypatch.setenv(shared.KNOB, "0")
    assert shared.check(offer) == f"{shared.KNOB}=0"  # on a worker: off for it alone


def _tile(plan, f, t, seed):
    tile = plan.grid.tile(t)
    rng = np.random.default_rng(seed)
    it = rng.integers(0, 100, (tile.height, tile.width)).astype(np.uint32)
    fr = rng.random((tile.height, tile.width), dtype=np.float32)
    counts = np.bincount(it.ravel())
    bins = np.flatnonzero(counts)
    packed = pack(ZSTD, [it, fr], (tile.height, tile.width), (plan.grid.tile_h, plan.grid.tile_w))
    return Finished(f, t, packed.payloads, bins.astype(np.int64), counts[bins].astype(np.int64),
                    0.01, 1, packed.crc)


def _wait_ready(slots: SlotWriter) -> None:
    """Until the sync thread gives something back (the deadline only guards against a hang)."""
    deadline = time.monotonic() + 120
    while not slots.ready():
        assert time.monotonic() < deadline, "the sync thread gave nothing back"
        time.sleep(0.001)


def test_a_tile_written_in_place_is_the_tile_the_master_writes(tmp_path):
    """A SlotWriter's bytes, made durable, then the master's bookkeeping from the record
    alone (no payloads): the same store, byte for byte, as the master writing it all;
    the record carries the stored lengths; a compacted store or another file is refused."""
    plan = make_plan(make_spec(size=(40, 23), frames=2, width=("3", "0.5"), tile=(16, 16), max_iter=100))
    a, b = tmp_path / "a.h5", tmp_path / "b.h5"
    layout.create(a, plan, codec=ZSTD)
    layout.create(b, plan, codec=ZSTD)
    tiles = [_tile(plan, f, t, 10 * f + t) for f in range(2) for t in range(plan.grid.count)]
    with StoreWriter(a, plan) as w:
        w.write(tiles)
    slots = SlotWriter(b, plan, os.stat(b).st_size)
    try:
        for r in tiles:
            slots.write(r.frame, r.tile, r.payloads)
            slots.submit(r)
        durable: list = []
        while len(durable) < len(tiles):
            _wait_ready(slots)
            got, failed = slots.take()
            assert not failed
            durable += got
        assert not slots.waiting
    finally:
        slots.close()
    records = [r.record() for r in durable]
    assert all(r.in_place and not r.payloads for r in records)
    assert [r.stored_lengths() for r in records] == [[len(p) for p in r.payloads] for r in tiles]
    with StoreWriter(b, plan) as w:
        w.write(records)
        assert not w.verify()  # every crc holds
    with h5py.File(a) as fa, h5py.File(b) as fb:
        for name in ("done", "frame_done", "histogram", "tiles/bytes", "tiles/crc"):
            assert np.array_equal(fa[name][...], fb[name][...]), name
    with StoreWriter(a, plan) as wa, StoreWriter(b, plan) as wb:
        for r in tiles:
            assert wa.chunks.payloads(wa.fd, r.frame, r.tile, wa._lengths(r.frame, r.tile)) == \
                wb.chunks.payloads(wb.fd, r.frame, r.tile, wb._lengths(r.frame, r.tile))
    with pytest.raises(StoreError, match="not the file"):
        SlotWriter(b, plan, os.stat(b).st_size + 1)


def test_tiles_whose_sync_fails_come_back_as_failed(tmp_path, monkeypatch):
    """A sync that fails (a full disk, an I/O error) gives its tiles back as failed, with
    the error: the worker then sends their bytes to the master (farm/schedule/worker.py)."""
    import errno

    import farm.store.inplace as inplace

    plan = make_plan(make_spec(size=(40, 23), frames=1, width=("3", "0.5"), tile=(16, 16), max_iter=100))
    path = tmp_path / "s.h5"
    layout.create(path, plan, codec=ZSTD)

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(inplace.os, "fdatasync", full)
    slots = SlotWriter(path, plan)
    try:
        r = _tile(plan, 0, 0, 1)
        slots.write(0, 0, r.payloads)
        slots.submit("tile")
        _wait_ready(slots)
        assert slots.take() == ([], ["tile"])
        assert slots.error is not None and slots.error.errno == errno.ENOSPC
    finally:
        slots.close()


# ---------------------------------------------------------------------------- under MPI


@pytest.fixture
def zoom(tmp_path, write_job):
    """A 16-frame zoom of 24 tiles a frame, and its one-process store."""
    job = write_job(size=(96, 64), frames=16, width=("3", "1e-4"), tile=(16, 16), max_iter="auto")
    single = tmp_path / "single.h5"
    result = run_farm("render", str(job), "--store", str(single), "--no-video", "--quiet")
    assert result.returncode == 0, result.stderr
    return job, single, 16 * 24


def test_a_worker_that_does_not_see_the_store_sends_its_tiles(tmp_path, zoom):
    """Rank 2 told the store is not shared with it (FARM_SHARED_STORE=0, as a failed
    token check leaves it) sends its tiles over MPI while rank 1 writes its own: the
    one-process store; with the knob on rank 0 too, every tile travels."""
    job, single, total = zoom
    store = tmp_path / "mixed.h5"
    farm = [sys.executable, "-m", "farm", "render", str(job), "--store", str(store), "--no-video",
            "--share-devices"]
    done = run([MPIEXEC, "-n", "2", *farm, ":", "-n", "1", "-env", shared.KNOB, "0", *farm],
               timeout=300, env={**os.environ, "FARM_TEST_TILE_DELAY": "0.01"})
    assert done.returncode == 0, done.stderr
    assert f"rank 2 sends its tiles to the master: {shared.KNOB}=0" in done.stderr
    assert "rank 1 sends" not in done.stderr
    with h5py.File(store) as f:
        ranks = f["tiles/rank"][...]
    assert {1, 2} <= set(np.unique(ranks).tolist())
    assert f"the workers wrote {int((ranks == 1).sum())} of the {total} tile(s)" in done.stderr
    assert_same_store(store, single)
    assert not shared.token_path(store).exists()  # removed at the end

    store = tmp_path / "off.h5"
    off = mpi_farm(3, "render", str(job), "--store", str(store), "--no-video", "--share-devices",
                   env={shared.KNOB: "0"})
    assert off.returncode == 0, off.stderr
    assert f"the workers wrote 0 of the {total} tile(s)" in off.stderr
    assert "sends its tiles" not in off.stderr  # the master offered nothing: nothing to say
    assert_same_store(store, single)


@pytest.mark.parametrize("point", ["slot-between-channels", "slot-written", "slot-synced"])
def test_worker_killed_while_writing_tiles_resumes_to_the_same_store(tmp_path, zoom, point):
    """SIGKILL of a worker inside its in-place write (between a tile's channels, after its
    last channel before the sync, after the sync before the record is sent): the master
    never marked that tile done, MPICH ends the job, and a resume (under MPI, writing
    over the half-written slots) gives the one-process store."""
    job, single, total = zoom
    store = tmp_path / "killed.h5"
    result = mpi_farm(3, "render", str(job), "--store", str(store), "--no-video", "--quiet",
                      "--share-devices", env={"FARM_TEST_CRASH_AT": f"{point}:30"})
    assert result.returncode != 0
    with h5py.File(store) as f:
        kept = int(f["done"][...].sum())
    assert kept < total
    resumed = mpi_farm(3, "resume", str(store), "--no-video", "--quiet", "--share-devices")
    assert resumed.returncode == 0, resumed.stderr
    assert_same_store(store, single)


@pytest.mark.parametrize("how", ["held", "before-done-flag"])
def test_master_killed_while_workers_write_resumes_to_the_same_store(tmp_path, zoom, how):
    """SIGKILL of the master while the workers write tiles into the store: held at a
    quarter of the tiles (the workers go on writing the tiles they hold) and killed
    there, or killed by its writer between the bookkeeping and the done flags of tiles
    the workers wrote. Tiles never marked done are rendered again on resume: the
    one-process store."""
    job, single, total = zoom
    store = tmp_path / "killed.h5"
    args = ("render", str(job), "--store", str(store), "--no-video", "--quiet", "--share-devices")
    if how == "held":
        proc = mpi_start(3, *args, hold=total // 4)
        done = wait_for_tiles(proc, store, total // 4)
        pid = _rank_pid(0, str(store))
        assert pid is not None and proc.poll() is None, "the render ended before the kill"
        os.kill(pid, signal.SIGKILL)
        proc.communicate(timeout=120)
        assert proc.returncode != 0
    else:
        result = mpi_farm(3, *args, env={"FARM_TEST_CRASH_AT": f"{how}:{total // 4}"})
        assert result.returncode != 0
        done = total // 4
    with h5py.File(store) as f:
        kept = int(f["done"][...].sum())
    assert done <= kept < total, (done, kept)
    resumed = mpi_farm(3, "resume", str(store), "--no-video", "--quiet", "--share-devices")
    assert resumed.returncode == 0, resumed.stderr
    assert_same_store(store, single)
