"""A finished store is compacted (farm/store/compact.py): it takes its compressed size in
``ls -l`` and in copies as on disk, reads back bitwise as the sparse store the render
left, and a kill -9 at any moment of the compaction leaves a store that opens and
resumes to the same data.

The sparse store a render leaves before its compaction is caught by killing the
render as its compaction begins (``FARM_TEST_CRASH_AT=compact-start``).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import h5py
import hdf5plugin  # noqa: F401 (registers the zstd filter for h5py)
import numpy as np
import pytest
from conftest import assert_same_datasets, job_text, run_farm

from farm.errors import EXIT_USAGE, StoreError
from farm.store import compact, space
from farm.store.lock import StoreLock
from farm.store.reader import Store
from farm.store.writer import StoreWriter

DATA = ("iterations", "fraction", "histogram", "done", "frame_done", "frames/max_iter", "tiles/crc")


def _job(root: Path, name: str, compression: str = "zstd", **kw) -> Path:
    job = root / f"{name}.toml"
    keys = dict(size=(256, 144), frames=8, width=("3", "1e-5"), tile=(128, 72), max_iter="auto",
                center=("-0.7436", "0.1318"))
    keys.update(kw)
    job.write_text(job_text(**keys, extra=f"""
        [output]
        store = "{root / (name + '.h5')}"
        video = "{root / (name + '.mp4')}"
        compression = "{compression}"
        """))
    return job


def _render(job: Path, *args: str, env: dict | None = None):
    return run_farm("render", str(job), "--no-video", "--quiet", *args, env=env)


def _sparse_and_compacted(root: Path, compression: str) -> tuple[Path, Path]:
    """The store a render left before compaction (killed as its compaction began: a
    hard link keeps it, with the row of the resume that then compacted it) and the same
    store compacted by that resume."""
    job = _job(root, compression, compression)
    killed = _render(job, env={"FARM_TEST_CRASH_AT": "compact-start"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    store = job.with_suffix(".h5")
    sparse = root / f"sparse-{compression}.h5"
    os.link(store, sparse)
    resumed = run_farm("resume", str(store), "--no-video", "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    assert os.stat(store).st_ino != os.stat(sparse).st_ino
    return sparse, store


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """compression -> (sparse store, compacted store) of the same zoom."""
    root = tmp_path_factory.mktemp("compact")
    return {c: _sparse_and_compacted(root, c) for c in ("zstd", "none")}


def _length_and_disk(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_size, st.st_blocks * 512


def _every_dataset(path: Path) -> list[str]:
    names: list[str] = []
    with h5py.File(path) as f:
        f.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset) else None)
    return sorted(names)


@pytest.mark.parametrize("compression", ["zstd", "none"])
def test_a_finished_store_takes_its_size_in_ls_and_in_copies(stores, tmp_path, compression):
    sparse, store = stores[compression]
    length, disk = _length_and_disk(store)
    assert abs(length - disk) <= 0.1 * disk, (length, disk)
    if compression == "zstd":  # what compaction is for: the slots' length was 2.5-3x the data
        was_length, was_disk = _length_and_disk(sparse)
        assert was_length > 2 * was_disk and length < was_length / 2, (was_length, was_disk, length)
    copy = tmp_path / "copy.h5"
    shutil.copyfile(store, copy)  # a copy that keeps no holes
    copy_length, copy_disk = _length_and_disk(copy)
    assert copy_length == length and abs(copy_disk - disk) <= 0.1 * disk + 8192, (copy_disk, disk)
    assert compact.is_compact(copy)


@pytest.mark.parametrize("compression", ["zstd", "none"])
def test_a_compacted_store_reads_back_bitwise_as_the_sparse_one(stores, compression):
    """Every dataset and attribute, through h5py with hdf5plugin (any HDF5 reader with the
    zstd filter) and through the farm's reader (which reads the packed chunks itself)."""
    sparse, store = stores[compression]
    assert not compact.is_compact(sparse) and compact.is_compact(store)
    names = _every_dataset(store)
    assert names == _every_dataset(sparse)
    with h5py.File(sparse) as a, h5py.File(store) as b:
        assert dict(a.attrs) == dict(b.attrs)
        for key in a.attrs:
            assert a.attrs.get_id(key).get_type() == b.attrs.get_id(key).get_type(), key
        for name in names:  # (the chunk index points at the packed chunks)
            assert a[name].dtype == b[name].dtype and a[name].shape == b[name].shape, name
            assert a[name][...].tobytes() == b[name][...].tobytes(), name
        assert b["iterations"].chunks == a["iterations"].chunks
        assert b["iterations"]._filters == a["iterations"]._filters
    with Store(sparse) as a, Store(store) as b:
        chunks = b._chunks()
        assert chunks is not None and chunks.packed  # read with pread, not through h5py
        for f in range(a.frames):
            ra, rb = a.raw(f), b.raw(f)
            assert np.array_equal(ra.iterations, rb.iterations) and np.array_equal(ra.fraction, rb.fraction)
            assert np.array_equal(ra.histogram, rb.histogram)
            assert np.array_equal(a.histogram(f), b.histogram(f))


def test_commands_and_the_lock_work_on_a_compacted_store(stores, tmp_path):
    _, original = stores["zstd"]
    store = tmp_path / "s.h5"
    shutil.copyfile(original, store)
    inode = os.stat(store).st_ino
    status = run_farm("status", str(store), "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["complete"] and json.loads(status.stdout)["rendering"] is None
    frames = run_farm("frames", str(store), "--out", str(tmp_path / "png"), "--frames", "6:8")
    assert frames.returncode == 0, frames.stderr
    assert sorted(p.name for p in (tmp_path / "png").iterdir()) == ["frame_00006.png", "frame_00007.png"]
    encoded = run_farm("encode", str(store), "--video", str(tmp_path / "v.mp4"))
    assert encoded.returncode == 0, encoded.stderr
    assert (tmp_path / "v.mp4").stat().st_size > 0
    with StoreLock(store):  # a render holds it: a resume waits for nothing and says who
        held = run_farm("resume", str(store), "--no-video")
    assert held.returncode == EXIT_USAGE and "being rendered by" in held.stderr
    for _ in range(2):  # a finished, compacted store: nothing rendered, nothing rewritten
        again = run_farm("resume", str(store), "--no-video")
        assert again.returncode == 0 and "compacted" not in again.stderr, again.stderr
    assert os.stat(store).st_ino == inode and compact.is_compact(store)
    assert not list(tmp_path.glob(".s.h5*"))  # no lock file, no temporary
    assert_same_datasets(store, original, DATA)


@pytest.mark.parametrize("point", ["compact-start", "compact-middle", "compact-end"])
def test_a_kill_during_compaction_leaves_a_store_that_resumes(stores, tmp_path, point):
    """SIGKILL as the compaction begins its temporary, halfway through the chunks, and
    with the temporary written and fsynced but not renamed: the store is the sparse one
    the render left (it opens, says it is complete), the temporary is left, and a resume
    removes it and compacts the store: the data of an uninterrupted render."""
    sparse, reference = stores["zstd"]
    job = _job(tmp_path, "zstd")
    killed = _render(job, env={"FARM_TEST_CRASH_AT": point})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    store = job.with_suffix(".h5")
    left = list(tmp_path.glob(".zstd.h5.*.compact"))
    assert len(left) == 1 and not compact.is_compact(store)
    status = run_farm("status", str(store), "--json")
    assert status.returncode == 0 and json.loads(status.stdout)["complete"], status.stderr
    assert_same_datasets(store, sparse, DATA)
    kept = tmp_path / "kept.h5"
    shutil.copyfile(store, kept)
    resumed = run_farm("resume", str(store), "--no-video")
    assert resumed.returncode == 0, resumed.stderr
    assert "store compacted" in resumed.stderr and "rendering on" not in resumed.stderr
    assert not left[0].exists() and compact.is_compact(store)
    assert_same_datasets(store, reference, DATA)  # as an uninterrupted render
    # the store the kill left, bitwise, but for the resume's row of runs
    assert_same_datasets(store, kept, [n for n in _every_dataset(kept) if n != "runs"])


def test_a_damaged_tile_of_a_compacted_store_is_rendered_again(stores, tmp_path):
    """--verify checks a compacted store read-only; a bad tile makes it sparse again
    (slots to write into; a kill before that rename leaves the compacted store), the
    tile is rendered again and the store compacted anew."""
    _, original = stores["zstd"]
    store = tmp_path / "s.h5"
    shutil.copyfile(original, store)
    with h5py.File(store) as f:  # frame 3's second tile, its fraction's frame
        info = f["fraction"].id.get_chunk_info_by_coord((3, 0, 128))
        length = int(f["tiles/bytes"][3, 1, 1])
    assert info.size == length  # packed: the chunk is just the stored frame
    with open(store, "r+b") as fh:
        fh.seek(info.byte_offset + length // 2)
        fh.write(b"\xde\xad\xbe\xef")
    damaged = store.read_bytes()
    killed = run_farm("resume", str(store), "--no-video", "--verify",
                      env={"FARM_TEST_CRASH_AT": "expand-end"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert store.read_bytes() == damaged and len(list(tmp_path.glob(".s.h5.*.compact"))) == 1
    verified = run_farm("resume", str(store), "--no-video", "--verify")
    assert verified.returncode == 0, verified.stderr
    assert "1 stored tile(s) failed their checksum" in verified.stderr
    assert compact.is_compact(store) and not list(tmp_path.glob(".s.h5.*.compact"))
    assert_same_datasets(store, original, DATA)
    again = run_farm("resume", str(store), "--no-video", "--verify")
    assert again.returncode == 0 and "checksum" not in again.stderr, again.stderr


def test_expanding_a_compacted_store_gives_back_the_sparse_one(stores, tmp_path):
    sparse, original = stores["zstd"]
    store = tmp_path / "s.h5"
    shutil.copyfile(original, store)
    with Store(store) as s:
        plan = s.plan()
    assert compact.damaged(store, plan) == []
    compact.expand(store, plan)
    assert not compact.is_compact(store)
    length, disk = _length_and_disk(store)
    assert length == pytest.approx(_length_and_disk(sparse)[0], rel=0.01) and disk < length / 2
    assert_same_datasets(store, sparse, [n for n in _every_dataset(sparse) if n != "runs"])
    with StoreWriter(store, plan) as w:  # slots again: a resume could write into it
        assert not w.chunks.packed and w.pending() == []


def test_the_writer_writes_no_tile_into_a_compacted_store(stores, tmp_path):
    from farm.store.writer import Finished

    _, original = stores["zstd"]
    store = tmp_path / "s.h5"
    shutil.copyfile(original, store)
    with Store(store) as s:
        plan = s.plan()
    with StoreWriter(store, plan) as w:
        assert w.chunks.packed and w.recover() == [] and w.pending() == []
        w.done[0, 0] = False  # as if it were not done
        tile = Finished(0, 0, [b"x", b"y"], np.zeros(0, np.int64), np.zeros(0, np.int64), 0.1, 0, 0)
        with pytest.raises(StoreError, match="compacted"):
            w.write([tile])
    assert_same_datasets(store, original, DATA)


def test_no_room_to_compact_leaves_the_store_as_it_was(stores, tmp_path, monkeypatch):
    sparse, _ = stores["zstd"]
    store = tmp_path / "s.h5"
    shutil.copyfile(sparse, store)
    with Store(store) as s:
        plan = s.plan()
    before = store.read_bytes()
    monkeypatch.setattr(space, "free", lambda path: 4096)
    with pytest.raises(OSError) as err:
        compact.compact(store, plan)
    assert err.value.errno == errno.ENOSPC and space.is_disk_full(err.value)
    assert store.read_bytes() == before and list(tmp_path.iterdir()) == [store]
    monkeypatch.undo()
    done = compact.compact(store, plan)
    assert done is not None and done.length < done.length_before / 2
    assert compact.compact(store, plan) is None  # compacted already


def test_a_render_without_room_to_compact_succeeds_and_a_resume_compacts_later(tmp_path):
    """On a file system with room for the store but not for a second copy of it: the
    render ends well (exit 0) with one line saying why the store stays sparse; once
    there is room, `farm resume` compacts it."""
    where = tmp_path / "small"
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(where)],
                             capture_output=True, check=False)
    if mounted.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        job = _job(where, "zstd")
        done = run_farm("render", str(job), "--no-video")
        assert done.returncode == 0, done.stderr
        store = job.with_suffix(".h5")
        lines = [line for line in done.stderr.splitlines() if "stays sparse" in line]
        assert len(lines) == 1 and "compacting it needs" in lines[0], done.stderr
        assert "free space first; `farm resume" in lines[0], done.stderr
        assert not compact.is_compact(store) and not list(where.glob(".*.compact"))
        subprocess.run(["mount", "-o", "remount,size=8m", str(where)], check=True)
        resumed = run_farm("resume", str(store), "--no-video")
        assert resumed.returncode == 0 and "store compacted" in resumed.stderr, resumed.stderr
        assert compact.is_compact(store)
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_a_deep_zooms_histogram_rows_take_no_room_once_compacted(tmp_path):
    """Rows of 10^7 bins (80 MB; the depth rule's limit) of which a few were written:
    compacted, only their chunks holding counts are stored, and colouring reads them
    from those; a frame of one tile reads as its byte planes (a GPU's colourer)."""
    from farm.store.codec import shuffle

    job = _job(tmp_path, "deep", size=(64, 36), center=("0.3", "0.6"), width=("0.01", "0.005"),
               frames=2, max_iter=10_000_000, tile=(64, 36))
    done = _render(job)
    assert done.returncode == 0, done.stderr
    store = job.with_suffix(".h5")
    length, disk = _length_and_disk(store)
    assert compact.is_compact(store) and length < 1 << 20 and abs(length - disk) <= 0.1 * disk
    with Store(store) as s:
        assert s.bins == 10_000_001
        for f in range(2):
            prefix, whole = s.histogram(f, full=False), s.histogram(f)
            assert prefix[-1] > 0 and np.array_equal(prefix, whole[:len(prefix)])
            assert not whole[len(prefix):].any() and whole.sum() == 64 * 36
            raw, planes = s.raw(f), s.planes(f)
            assert np.array_equal(raw.histogram, prefix) and planes is not None
            assert np.array_equal(planes.iterations, shuffle(raw.iterations).ravel())
            assert np.array_equal(planes.fraction, shuffle(raw.fraction).ravel())


def test_the_video_s_tail_reads_the_store_while_it_is_compacted(tmp_path):
    """The store is compacted while the video's process still colours frames (slowed to
    0.2 s a frame): its readers keep the descriptors they opened, so the video is the
    one `farm encode` makes from the compacted store, frame for frame at CRF 0, and the
    run's row records the video's end after the compaction."""
    from farm.runtime.media import ffmpeg_binary

    job = _job(tmp_path, "tail", frames=12, max_iter=200)
    job.write_text(job.read_text().replace("[output]", "[output]\ncrf = 0"))
    done = run_farm("render", str(job), env={"FARM_TEST_FRAME_DELAY": "0.2"})
    assert done.returncode == 0, done.stderr
    assert "store compacted" in done.stderr
    store, video = job.with_suffix(".h5"), job.with_suffix(".mp4")
    assert compact.is_compact(store)
    again = tmp_path / "again.mp4"
    assert run_farm("encode", str(store), "--video", str(again)).returncode == 0

    def frames(path: Path) -> list[str]:
        out = subprocess.run([ffmpeg_binary(), "-v", "error", "-i", str(path), "-map", "0:v:0",
                              "-f", "framemd5", "-"], capture_output=True, text=True, check=True).stdout
        return [line.split(",")[-1].strip() for line in out.splitlines() if line and line[0] != "#"]

    assert len(frames(video)) == 12 and frames(video) == frames(again)
    with Store(store) as s:
        run = s.status()["run"]["timeline"]
    assert run["video_frames"] == 12 and run["ended"] == run["video_ended"] >= run["render_ended"]
