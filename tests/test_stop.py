"""Stops that do not wait for the kernel, and a store path that is not eaten.

A stop (SIGINT, SIGTERM, SIGUSR1) must end the render within ``--grace`` plus a few
seconds however long the tile on the device takes: under Slurm a job that outlives
KillWait is killed, and everything since the last stored tile is lost. The job here
has two frames: frame 0 (width 1000) lies far outside the set (its tiles take milliseconds), frame
1 inside the main cardioid at ``max = 2000000`` (each of its tiles keeps PoCL busy for
tens of seconds: the kernel is still running when the signal comes).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest
from conftest import job_text, run_farm, start, wait_for_tiles

from farm.errors import EXIT_INTERRUPTED, EXIT_USAGE

GRACE = 1.0
# generous: the process has to stop its helpers and close the store; the tile it
# abandons takes far longer than this on any machine
STOP_WITHIN = GRACE + 20.0


def _slow_job(tmp_path):
    job = tmp_path / "slow.toml"
    job.write_text(job_text(size=(256, 128), tile=(128, 128), frames=2, width=("1000", "0.01"),
                            center=("-0.1", "0.1"), max_iter=2_000_000, precision="f64",
                            extra=f"""
                            [output]
                            store = "{tmp_path / 'slow.h5'}"
                            video = "{tmp_path / 'slow.mp4'}"
                            """))
    return job, tmp_path / "slow.h5"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_stop_during_a_long_kernel(tmp_path, sig):
    job, store = _slow_job(tmp_path)
    proc = start([sys.executable, "-m", "farm", "render", str(job), "--no-video",
                             "--grace", str(GRACE)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_for_tiles(proc, store, 2)  # frame 0 is stored; frame 1's kernel runs
        time.sleep(0.5)
        t0 = time.monotonic()
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=STOP_WITHIN)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == EXIT_INTERRUPTED, err
    assert took < STOP_WITHIN, f"stopped {took:.1f} s after the signal"
    assert "farm resume" in err and "Traceback" not in err
    with h5py.File(store, "r") as f:  # the finished frame is kept, the abandoned one is not
        done = f["done"][...]
        assert done[0].all() and not done[1].any()
        assert f["frame_done"][0] == 1
    status = run_farm("status", str(store), "--json")
    assert status.returncode == 0, status.stderr


def test_a_second_signal_stops_at_once(tmp_path):
    """The grace is for collecting finished tiles: a second Ctrl-C ends it early."""
    job, store = _slow_job(tmp_path)
    proc = start([sys.executable, "-m", "farm", "render", str(job), "--no-video",
                             "--grace", "600"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_for_tiles(proc, store, 2)
        proc.send_signal(signal.SIGINT)
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=STOP_WITHIN)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == EXIT_INTERRUPTED, err
    assert "second" in err


# ----------------------------------------------------------------- --restart


def _small_job(tmp_path, store):
    job = tmp_path / "job.toml"
    job.write_text(job_text(size=(24, 16), extra=f"""
        [output]
        store = "{store}"
        video = "{tmp_path / 'v.mp4'}"
        """))
    return job


def _foreign_files(tmp_path):
    text = tmp_path / "thesis.h5"
    text.write_text("four years of work\n")
    other = tmp_path / "other.h5"
    with h5py.File(other, "w") as f:
        f["data"] = np.arange(10)
    empty = tmp_path / "empty.h5"
    empty.write_bytes(b"")
    return [text, other, empty]


def test_restart_replaces_only_a_farm_store(tmp_path):
    for path in _foreign_files(tmp_path):
        before = path.read_bytes()
        job = _small_job(tmp_path, path)
        for command in (["render", str(job), "--restart", "--no-video"],
                        ["render", str(job), "--no-video"], ["validate", str(job)]):
            out = run_farm(*command)
            assert out.returncode == EXIT_USAGE, (command, out.stderr)
            assert "output.store" in out.stderr and str(path) in out.stderr
            assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
            assert path.read_bytes() == before, command
    # a store this farm wrote, for another job: --restart replaces it
    store = tmp_path / "mine.h5"
    first = run_farm("render", str(_small_job(tmp_path, store)), "--no-video")
    assert first.returncode == 0, first.stderr
    other = tmp_path / "job2.toml"
    other.write_text(job_text(size=(32, 16), extra=f"""
        [output]
        store = "{store}"
        video = "{tmp_path / 'v.mp4'}"
        """))
    assert run_farm("render", str(other), "--no-video").returncode == EXIT_USAGE
    again = run_farm("render", str(other), "--no-video", "--restart")
    assert again.returncode == 0, again.stderr
    with h5py.File(store) as f:
        assert f["iterations"].shape[1:] == (16, 32)


def test_validate_names_a_foreign_file_at_the_store_path(tmp_path):
    path = _foreign_files(tmp_path)[0]
    out = run_farm("validate", str(_small_job(tmp_path, path)))
    assert out.returncode == EXIT_USAGE and "not a zoomfarm store" in out.stderr



def test_a_replaced_store_is_removed_beside_the_start(tmp_path, monkeypatch):
    """--restart sets the old store aside (``.NAME.PID.replaced``) and removes it on a
    thread while the new one is made (freeing a large file's blocks took 0.7-0.9 s on a
    GPU host's disk, on the way to the first kernel); what a killed restart left aside
    is removed by the next creation of that store, nothing else is."""
    import os
    import threading

    from conftest import make_spec

    from farm.run import prepare as run
    from farm.store import layout

    spec = make_spec(size=(16, 8), tile=(16, 8), frames=2, max_iter=100)
    path = tmp_path / "s.h5"
    run.prepare_store(spec, path, restart=False, progress=False)
    old = path.stat().st_ino
    aside = tmp_path / f".s.h5.{os.getpid()}.replaced"
    killed = tmp_path / ".s.h5.999999.replaced"  # a restart killed before its removal ended
    others = [tmp_path / ".s.h5.x.replaced", tmp_path / ".t.h5.999999.replaced"]
    for left in (killed, *others):
        left.write_bytes(b"left")
    gate, seen = threading.Event(), []
    remove = layout.Replaced._remove
    monkeypatch.setattr(layout.Replaced, "_remove", lambda self: (gate.wait(timeout=30), remove(self)))
    real = run.compute_reference

    def references(plan, progress=True, early=None):
        seen.append(aside.exists() and aside.stat().st_ino == old)  # set aside, not yet removed
        return real(plan, progress, early)

    monkeypatch.setattr(run, "compute_reference", references)
    other = make_spec(size=(24, 8), tile=(24, 8), frames=2, max_iter=100)
    run.prepare_store(other, path, restart=True, progress=False)
    assert seen == [True] and path.stat().st_ino != old
    gate.set()
    layout._wait_for_removals()
    assert not aside.exists() and not killed.exists() and all(p.exists() for p in others)


def test_a_replaced_stores_blocks_count_as_free_space_until_it_is_gone(tmp_path, monkeypatch):
    import threading

    from conftest import make_spec

    from farm.errors import StoreError
    from farm.run import prepare as run
    from farm.store import layout, space

    spec = make_spec(size=(64, 32), tile=(64, 32), frames=4, max_iter=100)
    plan, codec = run.make_plan(spec), run.Codec()
    needed = layout.store_bytes(plan, codec)
    path = tmp_path / "s.h5"
    path.write_bytes(np.random.default_rng(0).bytes(needed + 8192))  # the store to replace
    gate = threading.Event()
    remove = layout.Replaced._remove
    monkeypatch.setattr(layout.Replaced, "_remove", lambda self: (gate.wait(timeout=30), remove(self)))
    replaced = layout.set_aside(path)
    assert replaced is not None and not path.exists()
    # no free space but the replaced store's blocks: it fits while they are being freed
    monkeypatch.setattr(space, "free", lambda p: 0)
    run._check_space(path, plan, codec, True, True, replaced)
    with pytest.raises(StoreError, match="needs"):
        run._check_space(path, plan, codec, True, True, None)
    # it does not fit even so (the blocks half freed): the check waits for the removal
    monkeypatch.setattr(space, "free", lambda p: 0 if replaced.path.exists() else needed)
    monkeypatch.setattr(space, "allocated", lambda p: 0)
    threading.Timer(0.2, gate.set).start()
    run._check_space(path, plan, codec, True, True, replaced)
    assert not replaced.path.exists()


def test_ctrl_c_at_a_terminal_stops_at_once(tmp_path):
    """Ctrl-C where standard input is a terminal: the render stops without its grace
    period and says that the tiles in flight are rendered again on resume; the resume
    completes the store (issue 44.6). SIGINT without a terminal keeps the grace period
    (test_stop_during_a_long_kernel)."""
    import pty

    from conftest import hold_at

    job = tmp_path / "zoom.toml"
    job.write_text(job_text(size=(64, 48), frames=8, width=("3", "1e-3"), tile=(16, 16), max_iter=200))
    store = tmp_path / "zoom.h5"
    terminal, tty = pty.openpty()
    try:
        proc = start([sys.executable, "-m", "farm", "render", str(job), "--store", str(store),
                      "--no-video", "--quiet", "--grace", "600"], stdin=tty, stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE, text=True,
                     env={**os.environ, "FARM_TEST_TILE_DELAY": "0.05", **hold_at(4)})
        wait_for_tiles(proc, store, 4)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=600)
    finally:
        os.close(terminal)
        os.close(tty)
    assert proc.returncode == EXIT_INTERRUPTED, err
    assert "stopping now" in err and "rendered again on resume" in err, err
    assert "finishing" not in err
    resumed = run_farm("resume", str(store), "--no-video", "--quiet")
    assert resumed.returncode == 0, resumed.stderr
