"""The references of a new render computed in a process of their own as the command
starts (farm/run/early_refs.py): the same references, the same store, or none taken."""

from __future__ import annotations

import os

import numpy as np
import pytest
from conftest import ROOT, assert_same_datasets, run_farm

from farm import spec as specmod
from farm.plan import make_plan
from farm.plan.reference_pack import pack
from farm.run.early_refs import EarlyReferences, begin

DEEP = {"size": (40, 24), "frames": 6, "center": ("-0.743643887037158704752191506114774",
                                                   "0.131825904205311970493132056385139"),
        "width": ("3", "1e-20"), "tile": (40, 24), "max_iter": 3000}


def _same(a, b) -> bool:
    (ma, oa), (mb, ob) = pack(a), pack(b)
    return np.array_equal(oa, ob) and all(
        np.array_equal(ma[k], mb[k]) if isinstance(ma[k], np.ndarray) else ma[k] == mb[k] for k in ma)


FORKED = """
import pickle, sys
from farm import spec as specmod
from farm.run.early_refs import EarlyReferences
early = EarlyReferences(sys.argv[1])
assert early.proc is None and early.pid is not None  # forked: one thread so far
sys.stdout.buffer.write(pickle.dumps(early.take(specmod.load(sys.argv[1]))))
"""


@pytest.mark.parametrize("how", ["fork", "process"])
def test_the_child_computes_the_references_the_command_would(write_job, monkeypatch, how):
    """Forked (a fresh command, before its threads), or ``python -m farm.run.early_refs``
    (where threads run already): the references and lines the command would make."""
    import pickle
    import subprocess
    import sys

    from conftest import checkout_env

    import farm.run.early_refs as early_refs

    job = write_job(**DEEP)
    spec = specmod.load(job)
    lines: list[str] = []
    want = make_plan(spec).references(lines.append)
    assert want is not None and len(want.refs) >= 1
    if how == "fork":
        done = subprocess.run([sys.executable, "-c", FORKED, str(job)], capture_output=True,
                              env=checkout_env(), check=True)
        got = pickle.loads(done.stdout)
    else:
        monkeypatch.setattr(early_refs.threading, "active_count", lambda: 2)
        child = EarlyReferences(job)
        assert child.proc is not None
        got = child.take(spec)
    assert got is not None
    refs, said = got
    assert _same(refs, want) and said == lines
    if how == "process":
        other = specmod.load(write_job("other", **{**DEEP, "max_iter": 2000}))
        assert EarlyReferences(job).take(other) is None  # another job: the command computes its own
        assert EarlyReferences(ROOT / "no-such-job.toml").take(spec) is None  # a child that failed


def test_a_render_with_early_references_stores_what_one_without_does(write_job, tmp_path, capsys,
                                                                     monkeypatch):
    """The command's render, its references taken from the child (checked: taken), and
    the same job rendered with FARM_EARLY_REFERENCES=0: the same stored references and
    pixels, the same lines about the references."""
    import farm.run.early_refs as early_refs
    from farm.run import RenderOptions, render

    monkeypatch.setattr(early_refs.threading, "active_count", lambda: 2)  # no fork of pytest itself
    job = write_job(**DEEP)
    without = tmp_path / "without.h5"
    done = run_farm("render", str(job), "--no-video", "--store", str(without),
                    env={"FARM_EARLY_REFERENCES": "0"})
    assert done.returncode == 0, done.stderr
    early, taken = EarlyReferences(job), []
    take = early.take
    early.take = lambda spec: taken.append(take(spec)) or taken[-1]  # type: ignore[method-assign]
    capsys.readouterr()
    with_early = tmp_path / "with.h5"
    assert render(specmod.load(job), store=str(with_early), early=early,
                  options=RenderOptions(video=False, progress=False)) == 0
    assert len(taken) == 1 and taken[0] is not None  # the child's references were used

    def said(text: str) -> list[str]:
        return [line for line in text.splitlines() if line.startswith("farm: reference:")]

    assert said(done.stderr) and said(capsys.readouterr().err) == said(done.stderr)
    assert_same_datasets(without, with_early, ["reference/orbits", "reference/point", "frames/reference",
                                               "iterations", "fraction"])
    from farm.run import prepare_store

    resuming = EarlyReferences(job)  # a store that resumes holds its references: the child ends at once
    prepare_store(specmod.load(job), with_early, restart=False, progress=False, early=resuming)
    assert resuming.proc is not None and resuming.proc.returncode is not None


@pytest.mark.parametrize("flag,cores,launcher,started", [("", 16, False, True), ("", 2, False, False),
                                                          ("1", 2, False, True), ("0", 16, False, False),
                                                          ("", 16, True, False)])
def test_when_the_child_starts(monkeypatch, write_job, flag, cores, launcher, started):
    """On machines of 4 cores or more unless FARM_EARLY_REFERENCES says otherwise; never
    under an MPI launcher."""
    import farm.run.early_refs as early_refs

    monkeypatch.setenv("FARM_EARLY_REFERENCES", flag)
    monkeypatch.setattr(early_refs, "usable_cores", lambda: cores)
    monkeypatch.setattr(early_refs, "launched_by_mpi", lambda: launcher)
    monkeypatch.setattr(early_refs.threading, "active_count", lambda: 2)  # no fork of pytest itself
    child = begin(write_job(**DEEP))
    assert (child is not None) == started
    if child is not None:
        pid = child.pid if child.proc is None else child.proc.pid
        child.cancel()
        child.cancel()  # (idempotent)
        with pytest.raises(ProcessLookupError):  # ended and reaped: nothing left running
            os.kill(pid, 0)


@pytest.mark.parametrize("auto", [False, True], ids=["fixed", "auto"])
def test_a_new_stores_body_and_builds_come_before_its_references(tmp_path, monkeypatch, auto):
    """prepare_store writes a new store's body (under its temporary name) and runs
    ``meanwhile`` before it takes the references, which the early references may still
    be computing; with max = "auto" (whose limits change the store) the body comes
    after them. References that fail leave no file at all."""
    from conftest import make_spec

    from farm.run import prepare as run

    spec = make_spec(**{**DEEP, "max_iter": "auto" if auto else 3000})
    temporary = tmp_path / f".s.h5.{os.getpid()}.tmp"
    seen: list[tuple[str, bool]] = []

    def now(step: str) -> None:
        seen.append((step, temporary.exists()))

    real = run.compute_reference

    def references(plan, progress=True, early=None):
        now("references")
        return real(plan, progress, early)

    monkeypatch.setattr(run, "compute_reference", references)
    path = tmp_path / "s.h5"
    killed = tmp_path / ".s.h5.999999.tmp"  # a creation killed while it waited (SIGTERM, kill -9)
    others = [tmp_path / ".s.h5.x.tmp", tmp_path / ".t.h5.999999.tmp"]  # not this store's
    for stale in (killed, *others):
        stale.write_bytes(b"left")
    run.prepare_store(spec, path, restart=False, progress=False,
                      meanwhile=lambda plan, codec: now("meanwhile"))
    assert not killed.exists() and all(p.exists() for p in others)
    for other in others:
        other.unlink()
    assert seen == [("meanwhile", not auto), ("references", not auto)]
    assert path.exists() and not list(tmp_path.glob(".*.tmp"))

    def failing(plan, progress=True, early=None):
        raise RuntimeError("no orbit")

    monkeypatch.setattr(run, "compute_reference", failing)
    with pytest.raises(RuntimeError, match="no orbit"):
        run.prepare_store(spec, tmp_path / "t.h5", restart=False, progress=False)
    assert not (tmp_path / "t.h5").exists() and not list(tmp_path.glob(".*.tmp"))
