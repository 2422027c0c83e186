"""Render and resume: from a job spec (or a store) to a complete store and a video.

One process: the master runs in the main thread and one worker thread per device
(every GPU the device selector gives, or one CPU device). Under ``mpiexec -n N``:
rank 0 is the master and the store's only writer, ranks 1..N-1 are workers, each
bound to one device of its node. Both paths share the master and worker loops, so
they produce the same store bit for bit.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from farm import spec as specmod
from farm.compute import clstart
from farm.compute.device import DeviceInfo, bind_device, bind_local
from farm.compute.launch import LaunchConfig
from farm.compute.prep import FramePrep, close_helpers, spawn_helpers
from farm.compute.render import TileRenderer
from farm.compute.render import build_ahead as render_programs_ahead
from farm.errors import DeviceError, FarmError, Interrupted, RenderFailed, StoreError, UsageError
from farm.plan import Plan, make_plan, structure
from farm.plan.references import References, pack, unpack, with_period_limits
from farm.plan.references import describe as describe_references
from farm.run.report import timeline_lines
from farm.runtime.progress import Progress
from farm.runtime.timeline import WORKER_COUNTERS, MasterTiming
from farm.schedule import transport
from farm.schedule.master import STOP_SIGNALS, MasterOptions, MasterReport, run_master
from farm.schedule.packer import Packer, pack_threads
from farm.schedule.worker import run_worker
from farm.store import layout, space
from farm.store.codec import Codec
from farm.store.estimate import WorkEstimate, eta_seconds, plan_shape
from farm.store.lock import StoreLock
from farm.store.reader import Store
from farm.store.writer import StoreWriter

if TYPE_CHECKING:
    from farm.encode.process import SinkProcess
    from farm.run.early_refs import EarlyReferences


@dataclass(frozen=True)
class RenderOptions:
    device: str = "auto"  # see farm.compute.device
    share_devices: bool = False  # allow more workers than devices on a node
    workers: int | None = None  # worker threads in one process (None: one per GPU, else 1)
    video: bool = True  # encode the video when the render completes
    restart: bool = False  # replace a store made by a different job
    verify: bool = False  # check every stored tile's crc before resuming
    sync_every: float = 10.0  # seconds between fdatasyncs of the store
    check_space: bool = True  # refuse a store its file system cannot hold
    progress: bool = True
    master: MasterOptions = field(default_factory=MasterOptions)


def _differences(a: specmod.JobSpec, b: specmod.JobSpec) -> list[str]:
    pa, pb = specmod.pixel_identity(a), specmod.pixel_identity(b)
    return [k for k in pa if pa[k] != pb[k]]


def prepare_store(spec: specmod.JobSpec, path: Path, restart: bool, progress: bool = True,
                  check_space: bool = True, timing: MasterTiming | None = None,
                  helpers: list | None = None, early: EarlyReferences | None = None,
                  meanwhile: Callable[[Plan, Codec], None] | None = None,
                  prepass_device: Any = None) -> tuple[Plan, References | None, Codec]:
    """Create the store for ``spec``, or check that the existing one is for the same
    job (then it resumes). ``restart`` replaces an existing store this farm wrote.
    Returns the plan, the references of its perturbed frames (chosen once, kept in the
    store) and how the store encodes its chunks (the workers pack tiles so).
    A store larger than its file system's largest file is refused first, and with
    ``check_space`` one that does not fit its free space;
    ``timing`` counts the seconds of the references; ``helpers``, frame preparation's
    processes started before (farm/compute/prep.py), share the escape pre-pass of
    ``max = "auto"``, or ``prepass_device`` (the render's device for it, whose context is
    made beside the start: :func:`_prepass_device`) does it (farm/compute/prepass.py; the
    same limits); ``early``, the
    references being computed beside the command's start (farm/run/early_refs.py), taken for
    a new store when they are this job's.

    A new store's body (everything but the references) is written before the
    references are taken, unless ``max = "auto"`` (their limits change its layout),
    and ``meanwhile(plan, codec)`` runs then too (the renderers' first program
    builds): while the early references are still being computed, neither waits for
    them, and neither is then left between the references and the first kernel."""
    specmod.check_writable(path, "output.store")
    layout.check_ours(path, "output.store")
    if path.exists() and not restart:
        with Store(path) as old:
            diff = _differences(old.spec, spec)
            if not diff:
                if early is not None:  # the store holds its references: end the child now, not
                    early.cancel()     # after the render (it would wait on its pipe till then)
                plan, codec = old.plan(), old.codec
                _check_space(path, plan, codec, False, check_space)
                return plan, old.references(), codec
        raise StoreError(
            f"output.store: {path} holds a different job (differs in {', '.join(diff)}); "
            "use --restart to replace it, or --store to choose another path")
    plan = make_plan(spec)
    codec = Codec(spec.output.compression, spec.output.compression_level)
    _check_space(path, plan, codec, restart, check_space)  # the largest file: always
    replaced = layout.set_aside(path)  # removed beside the start, not on its way
    layout.remove_stale(path)  # a creation killed while it waited for its references
    new = None
    try:
        if spec.iterations.max != "auto":
            with _creating(path, plan, codec):
                new = layout.begin(path, plan, codec)
        if meanwhile is not None:
            meanwhile(plan, codec)
        t0 = time.perf_counter()
        refs = compute_reference(plan, progress, early)
        if timing is not None:
            timing.reference_s += time.perf_counter() - t0
        if new is None:
            runner: Any = None
            if helpers:
                from farm.compute.prep import HelperRunner

                runner = HelperRunner(helpers)
            if prepass_device is not None:
                from farm.compute.prepass import DeviceRunner

                runner = DeviceRunner(prepass_device, fallback=runner)
            # max = "auto": a few periods of a nucleus reference, the frames' escape statistics
            limited = with_period_limits(plan, refs, runner)
            if limited is not plan:  # a longer histogram: the store grows
                _check_space(path, limited, codec, restart, check_space, replaced)
            plan = limited
            with _creating(path, plan, codec):
                new = layout.begin(path, plan, codec)
        with _creating(path, plan, codec):
            new.finish(refs)
    except BaseException:
        if new is not None:
            new.abort()
        raise
    return plan, refs, codec


@contextlib.contextmanager
def _creating(path: Path, plan: Plan, codec: Codec) -> Iterator[None]:
    """The store's creation: a file system's largest file or a full disk as one line."""
    try:
        yield
    except OSError as err:
        if err.errno == errno.EFBIG:  # a file system whose largest file space.MAX_FILE does not know
            raise StoreError(
                f"output.store: {path} is {space.human(layout.store_bytes(plan, codec, apparent=True))} "
                "long when complete, more than its file system holds in one file; choose a --store "
                "on another file system, or render fewer frames or pixels") from None
        if not space.is_disk_full(err):
            raise
        raise StoreError(f"output.store: {space.disk_full_reason(path, err)} while the store was "
                         "created; nothing was rendered") from None


def _check_space(path: Path, plan: Plan, codec: Codec, restart: bool, free_space: bool,
                 replaced: layout.Replaced | None = None) -> None:
    """The store's length against its file system's largest file (a compressed store is
    as long as an uncompressed one: its slots are sparse), and (``free_space``) what it
    takes on disk against the free space. With the store it replaces still being
    removed (``replaced``), its blocks count as free; should the store then not fit
    (its blocks may be half freed), the check waits for the removal and looks again."""
    def check() -> None:
        space.check(path, layout.store_bytes(plan, codec), "output.store", replacing=restart,
                    free_space=free_space, apparent=layout.store_bytes(plan, codec, apparent=True),
                    freeing=replaced.path if replaced is not None else None)

    try:
        check()
    except StoreError:
        if replaced is None:
            raise
        replaced.wait()
        check()


def compute_reference(plan: Plan, progress: bool = True,
                      early: EarlyReferences | None = None) -> References | None:
    """The references of the plan's perturbed frames (None if there are none), chosen
    as farm/plan/references.py describes (or taken from ``early``, which chose them so
    for this job in a process of its own), one line each on stderr, and the warning of
    farm/plan/structure.py when the zoom runs out of structure."""
    taken = early.take(plan.spec) if early is not None else None
    if taken is not None:
        refs, lines = taken
        for text in lines:
            print(f"farm: {text}", file=sys.stderr)
    else:
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
    meta = transport.quiet_bcast(comm, meta)
    if meta is None:
        return None
    orbits = transport.bcast_array(comm, orbits)
    assert orbits is not None
    return unpack(meta, orbits)


@dataclass
class _Session:
    """The master's side of one render, from the store's preparation to its end."""

    plan: Plan
    store_path: Path
    options: RenderOptions
    timing: MasterTiming
    sink: SinkProcess | None  # the video, coloured and encoded while the render runs
    video_path: Path | None = None  # where the sink put it
    job: specmod.JobSpec | None = None  # whose video settings the sink has
    video: str | None = None  # the video path the sink was given


def _spawn_sink(options: RenderOptions) -> SinkProcess | None:
    """The video's process (farm/encode/process.py), started before anything else, or
    None (--no-video)."""
    if not options.video:
        return None
    from farm.encode.process import SinkProcess

    return SinkProcess()


def _open_sink(sink: SinkProcess | None, spec: specmod.JobSpec, store_path: Path,
               video: str | None) -> SinkProcess | None:
    """Give the video's process its job: the job's colours and output settings (not the
    store's: a render that changes only them recolours the stored frames). A palette or
    video path that cannot be used is an error here, before any work."""
    if sink is None or not video:
        return None
    from farm.encode import check_video

    check_video(store_path, spec.color, video)
    return sink.start(store_path, specmod.canonical_text(spec), video)


def _master_session(session: _Session, link: transport.MasterLink,
                    workers: int) -> MasterReport | None:
    """Render what the store lacks, the video alongside. The sink is finished (the video
    in place) or aborted (nothing left under its name) before this returns."""
    try:
        report = _write_session(session, link, workers)
    except OSError as err:  # a disk that fills outside the writer thread (run row, sync)
        if session.sink:
            session.sink.abort()
        if not space.is_disk_full(err):
            raise
        path = session.store_path
        raise Interrupted(f"{space.disk_full_reason(path, err)}; {path} keeps every "
                          f"finished tile: `farm resume {path}` continues") from None
    except BaseException:
        if session.sink:
            session.sink.abort()
        raise
    return report


def _write_session(session: _Session, link: transport.MasterLink,
                   workers: int) -> MasterReport | None:
    plan, options, sink = session.plan, session.options, session.sink
    with StoreWriter(session.store_path, plan, workers=workers,
                     sync_every=options.sync_every) as writer:
        bad = writer.recover(full=options.verify)
        if bad:
            print(f"farm: {len(bad)} stored tile(s) failed their checksum and will be "
                  "rendered again", file=sys.stderr)
        if sink:
            for f in plan.frames_ready(writer.frame_done):  # frames a resume finds done
                sink.frame_complete(int(f))
        pending = writer.pending()
        if sink and not pending and _video_in_place(session):  # nothing to do (issue 25.6c)
            sink.abort()
            sink = session.sink = None
        timeline: dict[str, float] = {"process_started": session.timing.process_started,
                                      "reference_s": session.timing.reference_s}
        report = None
        if pending:
            report = _render(session, writer, link, pending, timeline)
        if sink:
            if report is None or report.end.status == "finished":
                writer.sync_soon()  # the store to disk while the video's tail is made
                t0 = time.perf_counter()
                session.video_path = sink.finish()
                timeline.update(video_ended=time.time(), color_s=sink.color_s,
                                encode_s=sink.write_s, video_frames=sink.written)
                timeline.setdefault("render_ended", time.time() - (time.perf_counter() - t0))
            else:
                sink.abort()
        writer.end_run(timeline)
    if session.video_path is not None and session.job is not None:  # the writer has closed
        from farm.encode import record

        record.remember(session.store_path, session.video_path, session.job)
    if options.progress and (report is not None or sink):
        with Store(session.store_path) as store:
            lines = timeline_lines(store.status()["run"])
        print("\n".join(f"farm: {line}" for line in lines), file=sys.stderr)
    return report


def _video_in_place(session: _Session) -> bool:
    """Whether the complete store's video is the one its render made with the session's
    settings, unchanged since (farm/encode/record.py); says so on stderr when it is."""
    from farm.encode import record

    if session.job is None or session.video is None:
        return False
    output = record.output_path(session.video, len(session.plan.video_frames))
    if not record.up_to_date(session.store_path, output, session.job):
        return False
    print(f"farm: {output} is in place, made from this store with these settings; nothing to do",
          file=sys.stderr)
    return True


def _render(session: _Session, writer: StoreWriter, link: transport.MasterLink,
            pending: list[tuple[int, int]], timeline: dict[str, float]) -> MasterReport:
    """The master loop over the pending tiles, with progress and the timeline's
    render part (into ``timeline``)."""
    plan, options = session.plan, session.options
    estimate = WorkEstimate(writer.done, writer.meta["tiles/seconds"], plan_shape(plan))
    device_s = [0.0]  # this run's device seconds so far
    worker_counters: dict[int, tuple[float, ...]] = {}  # each worker's latest totals

    def observe(batch: list) -> None:
        for r in batch:
            estimate.add(r.frame, r.tile, r.seconds)
            device_s[0] += r.seconds
            worker_counters[r.rank] = r.counters

    bar = Progress(plan.tasks, "render", done=plan.tasks - len(pending),
                   eta=lambda wall: eta_seconds(estimate.remaining_device_s(), device_s[0], wall))
    bar.enabled = options.progress
    on_frame = (plan.frame_notifier(writer.frame_done, session.sink.frame_complete)
                if session.sink else None)  # expmap: completed units -> ready video frames
    try:
        report = run_master(writer, link, options.master, bar, on_batch=observe, on_frame=on_frame)
    finally:
        bar.close()
    timeline.update(master_busy=report.busy_s, writer_busy=report.writer_busy_s,
                    master_receive=report.receive_s, render_ended=time.time(), gpu_s=device_s[0])
    for k, name in enumerate(WORKER_COUNTERS):
        timeline[f"{name}_s"] = sum(c[k] for c in worker_counters.values() if len(c) > k)
    return report


def _finish(report: MasterReport | None, session: _Session) -> int:
    store_path = session.store_path
    if report is not None:
        if report.end.status == "interrupted":
            raise Interrupted(f"{report.end.reason}; {store_path} keeps every finished tile: "
                              f"`farm resume {store_path}` continues")
        if report.end.status == "failed":
            raise RenderFailed(f"render failed: {report.end.reason}; finished tiles are saved "
                               f"in {store_path}")
    if session.video_path is not None:
        print(f"farm: wrote {session.video_path}", file=sys.stderr)
    return 0


def _run_in_process(session: _Session, refs: References | None, codec: Codec,
                    bound: list[tuple[DeviceInfo, Any]], helpers: list) -> MasterReport | None:
    """The master in this thread, one worker thread per device (every GPU of the
    machine: tiles reach the writer by reference, and no launcher starts processes),
    and one packer whose threads pack every worker's tiles."""
    plan = session.plan
    for info, _ in bound:
        print(f"farm: rendering on {info.describe()}", file=sys.stderr)
    ranks = list(range(len(bound)))
    link = transport.ThreadMaster(ranks)
    # each frame's host work once, for every GPU (in helper processes where GPUs render)
    configs = [LaunchConfig.for_device(i) for i, _ in bound]
    prep = FramePrep(plan, refs, threads=len(bound), high_degree=all(c.high_degree for c in configs),
                     helpers=helpers)
    packer = Packer(plan, codec, pack_threads(len(bound)))
    threads = []
    for rank, (info, device) in zip(ranks, bound, strict=True):
        def make(info: DeviceInfo = info, device: Any = device) -> TileRenderer:
            # one slot to begin with: run_worker makes the others beside the first launches
            return TileRenderer(device, info, plan, slots=1, references=refs, prep=prep,
                                shuffle=codec.compressed)
        threads.append(threading.Thread(target=run_worker, name=f"farm-worker-{rank}", daemon=True,
                                        args=(plan, make, link.link(rank), packer)))
    for t in threads:
        t.start()
    try:
        return _master_session(session, link, len(bound))
    finally:
        for rank, t in zip(ranks, threads, strict=True):
            link.release(rank)
            t.join(timeout=10)
        packer.close()
        prep.close()


def render(spec: specmod.JobSpec, store: str | None = None, video: str | None = None,
           options: RenderOptions = RenderOptions(), early: EarlyReferences | None = None) -> int:
    """``farm render``: create or resume the store, render what is missing, encode;
    ``early``: the job's references being computed beside the start (farm/run/early_refs.py)."""
    store_path = Path(store or spec.output.store)
    video = video or spec.output.video
    comm = transport.mpi_world()
    if comm is not None:
        return _render_mpi(comm, lambda: (spec, store_path, video), options)
    _check_paths(store_path, video, options)
    timing = MasterTiming()
    sink = _spawn_sink(options)
    helpers: list = []
    try:
        bound = bind_local(options.device, options.workers)  # before anything is written
        clstart.prepare_contexts([device for _, device in bound])  # beside the reference orbit
        # frame preparation's helper processes (GPUs) start now: their imports overlap the
        # store's preparation (the reference orbit, the store's creation)
        configs = [LaunchConfig.for_device(i) for i, _ in bound]
        helpers = spawn_helpers(max(c.prep_processes for c in configs) * len(bound))
        built: list = []  # programs built ahead, held until the renderers have them

        def build_ahead(plan: Plan, codec: Codec) -> None:
            for info, device in bound:
                try:
                    built.extend(render_programs_ahead(device, info, plan, codec.compressed))
                except Exception:  # (it fails again in the renderer, which says so as before)
                    continue

        with StoreLock(store_path):
            plan, refs, codec = prepare_store(spec, store_path, options.restart, options.progress,
                                              options.check_space, timing, helpers, early,
                                              # (without the early references, the context
                                              # is made beside this process's own orbit instead)
                                              meanwhile=build_ahead if early is not None else None,
                                              prepass_device=_prepass_device(bound))
            session = _Session(plan, store_path, options, timing,
                               _open_sink(sink, spec, store_path, video), job=spec, video=video)
            taken, helpers = helpers, []  # the FramePrep stops them
            return _finish(_run_in_process(session, refs, codec, bound, taken), session)
    except BaseException:
        close_helpers(helpers)
        if sink is not None:
            sink.abort()
        raise
    finally:
        clstart.release_unused()


def _prepass_device(bound: list) -> Any:
    """The device a render's escape pre-pass runs on: its first GPU, else its first
    device (PoCL's CPU device: 5-10x numpy's speed on two cores for most jobs; a CPU
    device's compiler is checked on kernels/prepass.cl before it is chosen,
    farm/compute/kernelcheck.py)."""
    for info, device in bound:
        if info.kind == "GPU":
            return device
    return bound[0][1] if bound else None


def _check_paths(store_path: Path, video: str, options: RenderOptions) -> None:
    """Every output path, before any work: one line and exit 2 for a path that
    cannot be written."""
    specmod.check_writable(store_path, "output.store")
    if options.video:
        specmod.check_writable(video, "output.video")


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
    local_index, local_workers, host = transport.node_worker_index(comm)
    bound, problem = None, None
    if comm.Get_rank() != 0:
        try:
            bound = bind_device(options.device, local_index, options.share_devices)
            clstart.prepare_contexts([bound[1]])  # while the master computes the references
        except FarmError as err:
            problem = (type(err).__name__, f"rank {comm.Get_rank()} on {host}: {err}")
    problems = [p for p in transport.quiet_gather(comm, problem) or [] if p]
    if comm.Get_rank() != 0:
        try:
            plan, codec = transport.quiet_bcast(comm)
            if plan is not None:
                refs = _bcast_references(comm, None)
                if bound is not None:
                    _mpi_worker(comm, plan, refs, codec, bound, local_workers)
        finally:
            clstart.release_unused()
        return 0
    plan, refs, codec = None, None, None
    held = contextlib.ExitStack()  # the store's lock, from the path check to the video
    try:
        if problems:
            kind = UsageError if all(k == "UsageError" for k, _ in problems) else DeviceError
            raise kind("; ".join(text for _, text in problems))
        spec, store_path, video = job()
        _check_paths(store_path, video, options)
        timing = MasterTiming()
        sink = _spawn_sink(options)
        if sink is not None:
            held.callback(sink.abort)  # unless the render ends well: _master_session finishes it
        held.enter_context(StoreLock(store_path))
        plan, refs, codec = prepare_store(spec, store_path, options.restart, options.progress,
                                          options.check_space, timing)
        session = _Session(plan, store_path, options, timing,
                           _open_sink(sink, spec, store_path, video), job=spec, video=video)
    except BaseException:
        held.close()
        raise
    finally:
        transport.quiet_bcast(comm, (plan, codec))  # a None plan tells the workers to go home
    with held:
        _bcast_references(comm, refs)
        link = transport.MpiMaster(comm, plan.channels)
        print(f"farm: master on {host}, {len(link.workers)} worker(s)", file=sys.stderr)
        try:
            report = _master_session(session, link, len(link.workers))
        finally:
            for w in link.workers:  # idempotent: workers already released ignore it
                link.release(w)
            link.drain()
        return _finish(report, session)


def _mpi_worker(comm, plan: Plan, refs: References | None, codec: Codec,
                bound: tuple[DeviceInfo, Any], local_workers: int) -> None:
    """A worker rank, packing its tiles on its share of the node's cores. Launchers
    (mpiexec, srun) pass stop signals to every rank: workers ignore them and stop when
    the master, which collects the tiles in flight, says so."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    info, device = bound
    packer = Packer(plan, codec, pack_threads(1, processes=local_workers))
    try:
        run_worker(plan, lambda: TileRenderer(device, info, plan, slots=1, references=refs,
                                              shuffle=codec.compressed),  # the others: run_worker
                   transport.MpiWorker(comm), packer)
    finally:
        packer.close()
