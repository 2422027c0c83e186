"""Render and resume: from a job spec (or a store) to a complete store and a video.

One process: the master runs in the main thread and one worker in a second
thread on the chosen device. Under ``mpiexec -n N``: rank 0 is the master and
the store's only writer, ranks 1..N-1 are workers, each bound to one device of
its node. Both paths share the master and worker loops, so they produce the
same store bit for bit.
"""

from __future__ import annotations

import dataclasses
import signal
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from farm import spec as specmod
from farm.compute.device import DeviceInfo, bind_device
from farm.compute.render import TileRenderer
from farm.errors import DeviceError, FarmError, Interrupted, RenderFailed, StoreError, UsageError
from farm.plan import Plan, make_plan, structure
from farm.plan.references import References, pack, unpack
from farm.plan.references import describe as describe_references
from farm.progress import Progress
from farm.schedule import transport
from farm.schedule.master import STOP_SIGNALS, MasterOptions, MasterReport, run_master
from farm.schedule.worker import run_worker
from farm.store import layout
from farm.store.reader import Store
from farm.store.writer import StoreWriter


@dataclass(frozen=True)
class RenderOptions:
    device: str = "auto"  # see farm.compute.device
    share_devices: bool = False  # allow more workers than devices on a node
    video: bool = True  # encode the video when the render completes
    restart: bool = False  # replace a store made by a different job
    verify: bool = False  # check every stored tile's crc before resuming
    sync_every: float = 10.0  # seconds between fdatasyncs of the store
    progress: bool = True
    master: MasterOptions = field(default_factory=MasterOptions)


def _differences(a: specmod.JobSpec, b: specmod.JobSpec) -> list[str]:
    pa, pb = specmod.pixel_identity(a), specmod.pixel_identity(b)
    return [k for k in pa if pa[k] != pb[k]]


def prepare_store(spec: specmod.JobSpec, path: Path, restart: bool,
                  progress: bool = True) -> tuple[Plan, References | None]:
    """Create the store for ``spec``, or check that the existing one is for the same
    job (then it resumes). ``restart`` replaces an existing store. Returns the plan and
    the references of its perturbed frames (chosen once, kept in the store)."""
    specmod.check_writable(path, "output.store")
    if path.exists() and restart:
        path.unlink()
    elif path.exists():
        with Store(path) as old:
            diff = _differences(old.spec, spec)
            if not diff:
                return old.plan(), old.references()
        raise StoreError(
            f"output.store: {path} holds a different job (differs in {', '.join(diff)}); "
            "use --restart to replace it, or --store to choose another path")
    plan = make_plan(spec)
    refs = compute_reference(plan, progress)
    layout.create(path, plan, refs)
    return plan, refs


def compute_reference(plan: Plan, progress: bool = True) -> References | None:
    """The references of the plan's perturbed frames (None if there are none), chosen
    as farm/plan/references.py describes, one line each on stderr, and the warning of
    farm/plan/structure.py when the zoom runs out of structure."""
    refs = plan.references(lambda text: print(f"farm: {text}", file=sys.stderr))
    if refs is not None:
        for line in describe_references(refs, plan):
            print(f"farm: reference: {line}", file=sys.stderr)
    for line in structure.check(plan, refs):  # a zoom into nothing: warn, render anyway
        print(f"farm: warning: {line}", file=sys.stderr)
    return refs


def _bcast_references(comm, refs: References | None) -> References | None:
    """References from rank 0 to every rank: metadata pickled, the orbits as one
    buffer."""
    meta, orbits = pack(refs) if refs is not None else (None, None)
    meta = comm.bcast(meta, root=0)
    if meta is None:
        return None
    orbits = transport.bcast_array(comm, orbits)
    assert orbits is not None
    return unpack(meta, orbits)


def _master_session(plan: Plan, store_path: Path, link: transport.MasterLink, workers: int,
                    options: RenderOptions) -> MasterReport | None:
    with StoreWriter(store_path, plan, workers=workers, sync_every=options.sync_every) as writer:
        bad = writer.recover(full=options.verify)
        if bad:
            print(f"farm: {len(bad)} stored tile(s) failed their checksum and will be "
                  "rendered again", file=sys.stderr)
        pending = writer.pending()
        if not pending:
            return None
        bar = Progress(plan.tasks, "render", done=plan.tasks - len(pending))
        bar.enabled = options.progress
        try:
            report = run_master(writer, link, options.master, bar)
        finally:
            bar.close()
        writer.end_run(report.busy_s, report.writer_busy_s, report.receive_s)
        if options.progress:
            print(f"farm: {report.summary()}", file=sys.stderr)
        return report


def _finish(report: MasterReport | None, store_path: Path, video: str | None,
            options: RenderOptions) -> int:
    if report is not None:
        if report.end.status == "interrupted":
            raise Interrupted(f"{report.end.reason}; {store_path} keeps every finished tile: "
                              f"`farm resume {store_path}` continues")
        if report.end.status == "failed":
            raise RenderFailed(f"render failed: {report.end.reason}; finished tiles are saved "
                               f"in {store_path}")
    if options.video and video:
        from farm.encode import encode_video

        with Store(store_path) as store:
            path = encode_video(store, video, progress=options.progress)
        print(f"farm: wrote {path}", file=sys.stderr)
    return 0


def _run_in_process(plan: Plan, refs: References | None, store_path: Path,
                    options: RenderOptions) -> MasterReport | None:
    info, device = bind_device(options.device)
    print(f"farm: rendering on {info.describe()}", file=sys.stderr)
    link = transport.ThreadMaster([0])
    thread = threading.Thread(
        target=run_worker, name="farm-worker", daemon=True,
        args=(plan, lambda: TileRenderer(device, info, plan, references=refs), link.link(0)))
    thread.start()
    try:
        return _master_session(plan, store_path, link, 1, options)
    finally:
        link.release(0)
        thread.join(timeout=10)


def render(spec: specmod.JobSpec, store: str | None = None, video: str | None = None,
           options: RenderOptions = RenderOptions()) -> int:
    """``farm render``: create or resume the store, render what is missing, encode."""
    store_path = Path(store or spec.output.store)
    video = video or spec.output.video
    comm = transport.mpi_world()
    if comm is not None:
        return _render_mpi(comm, lambda: (spec, store_path, video), options)
    if options.video:
        specmod.check_writable(video, "output.video")
    plan, refs = prepare_store(spec, store_path, options.restart, options.progress)
    return _finish(_run_in_process(plan, refs, store_path, options), store_path, video, options)


def resume(store: str, video: str | None = None, options: RenderOptions = RenderOptions()) -> int:
    """``farm resume STORE``: continue the job the store holds."""
    store_path = Path(store)

    def job() -> tuple[specmod.JobSpec, Path, str]:
        with Store(store_path) as s:
            return s.spec, store_path, video or s.spec.output.video

    comm = transport.mpi_world()
    if comm is not None:
        return _render_mpi(comm, job, options)
    spec, _, video_path = job()  # the stored spec: prepare_store finds the same job and resumes
    return render(spec, store=store, video=video_path, options=dataclasses.replace(options, restart=False))


# ============================================================================ MPI


def _render_mpi(comm, job, options: RenderOptions) -> int:
    """Rank 0: prepare, broadcast the plan, run the master. Others: work.

    Before anything is written, every worker binds its device and the master hears
    of any that cannot (too many workers for the node's GPUs, a missing driver)."""
    local_index, host = transport.node_worker_index(comm)
    bound, problem = None, None
    if comm.Get_rank() != 0:
        try:
            bound = bind_device(options.device, local_index, options.share_devices)
        except FarmError as err:
            problem = (type(err).__name__, f"rank {comm.Get_rank()} on {host}: {err}")
    problems = [p for p in comm.gather(problem, root=0) or [] if p]
    if comm.Get_rank() != 0:
        plan = comm.bcast(None, root=0)
        if plan is not None:
            refs = _bcast_references(comm, None)
            if bound is not None:
                _mpi_worker(comm, plan, refs, bound)
        return 0
    plan, refs = None, None
    try:
        if problems:
            kind = UsageError if all(k == "UsageError" for k, _ in problems) else DeviceError
            raise kind("; ".join(text for _, text in problems))
        spec, store_path, video = job()
        if options.video:
            specmod.check_writable(video, "output.video")
        plan, refs = prepare_store(spec, store_path, options.restart, options.progress)
    finally:
        comm.bcast(plan, root=0)  # None tells the workers to go home
    _bcast_references(comm, refs)
    link = transport.MpiMaster(comm, plan.channels)
    print(f"farm: master on {host}, {len(link.workers)} worker(s)", file=sys.stderr)
    try:
        report = _master_session(plan, store_path, link, len(link.workers), options)
    finally:
        for w in link.workers:  # idempotent: workers already released ignore it
            link.release(w)
        link.drain()
    return _finish(report, store_path, video, options)


def _mpi_worker(comm, plan: Plan, refs: References | None, bound: tuple[DeviceInfo, Any]) -> None:
    """A worker rank. Launchers (mpiexec, srun) pass stop signals to every rank: workers
    ignore them and stop when the master, which collects the tiles in flight, says so."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    info, device = bound
    run_worker(plan, lambda: TileRenderer(device, info, plan, references=refs),
               transport.MpiWorker(comm))
