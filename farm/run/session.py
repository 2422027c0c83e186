"""The master's side of one render, from a prepared store to its end: the writer, the master
loop over the pending tiles with progress, the video made alongside by the frame sink
(farm/encode/process.py), and the run's timeline."""


from __future__ import annotations

import contextlib
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from farm import spec as specmod
from farm.errors import Interrupted, RenderFailed
from farm.plan import Plan
from farm.run.report import timeline_lines
from farm.runtime.progress import Progress
from farm.runtime.timeline import WORKER_COUNTERS, MasterTiming
from farm.schedule import transport
from farm.schedule.master import MasterOptions, MasterReport, run_master
from farm.store import space
from farm.store.estimate import RunClock, WorkEstimate, plan_shape
from farm.store.reader import Store
from farm.store.writer import StoreWriter

if TYPE_CHECKING:
    from farm.encode.process import SinkProcess


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


class VideoSink(Protocol):
    """What the master session asks of the video made alongside the render: the video's
    process on this host (farm/encode/process.py SinkProcess), or the shares of several
    nodes (farm/run/mpi.py NodeShares)."""

    color_s: float
    write_s: float
    written: int
    local: bool  # it reads the store on this host (so its descriptors outlive a rename)

    def frame_complete(self, f: int) -> None: ...

    def finish(self) -> Path: ...

    def abort(self) -> None: ...


@dataclass
class Session:
    """The master's side of one render, from the store's preparation to its end."""

    plan: Plan
    store_path: Path
    options: RenderOptions
    timing: MasterTiming
    sink: VideoSink | None  # the video, coloured and encoded while the render runs
    video_path: Path | None = None  # where the sink put it
    job: specmod.JobSpec | None = None  # whose video settings the sink has
    video: str | None = None  # the video path the sink was given
    announce: list[str] = field(default_factory=list)  # said once there are tiles to render


def spawn_sink(options: RenderOptions) -> SinkProcess | None:
    """The video's process (farm/encode/process.py), started before anything else, or
    None (--no-video)."""
    if not options.video:
        return None
    from farm.encode.process import SinkProcess

    return SinkProcess()


def open_sink(sink: SinkProcess | None, spec: specmod.JobSpec, store_path: Path,
               video: str | None) -> SinkProcess | None:
    """Give the video's process its job: the job's colours and output settings (not the
    store's: a render that changes only them recolours the stored frames). A palette or
    video path that cannot be used is an error here, before any work."""
    if sink is None or not video:
        return None
    from farm.encode import check_video

    check_video(store_path, spec.color, video)
    return sink.start(store_path, specmod.canonical_text(spec), video)


def master_session(session: Session, link: transport.MasterLink,
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


def _write_session(session: Session, link: transport.MasterLink,
                   workers: int) -> MasterReport | None:
    from farm.store import compact  # a complete store is compacted (farm/store/compact.py)

    plan, options, sink, path = session.plan, session.options, session.sink, session.store_path
    verify = options.verify
    if verify and compact.is_compact(path):  # checked here, read-only; a bad tile needs its slot
        verify = bool(compact.damaged(path, plan))
        if verify:
            compact.expand(path, plan)
    with StoreWriter(session.store_path, plan, workers=workers,
                     sync_every=options.sync_every) as writer:
        bad = writer.recover(full=verify)
        if bad:
            print(f"farm: {len(bad)} stored tile(s) failed their checksum and will be "
                  "rendered again", file=sys.stderr)
        if sink:
            for f in plan.frames_ready(writer.frame_done):  # frames a resume finds done
                sink.frame_complete(int(f))
        pending = writer.pending()
        if sink and not pending and video_in_place(session):  # nothing to do (issue 25.6c)
            sink.abort()
            sink = session.sink = None
        timeline: dict[str, float] = {"process_started": session.timing.process_started,
                                      "reference_s": session.timing.reference_s}
        report = None
        if pending:
            for line in session.announce:
                print(line, file=sys.stderr)
            report = _render(session, writer, link, pending, timeline)
        ended_well = report is None or report.end.status == "finished"
        video = sink if ended_well else None  # the video to finish
        if sink is not None and video is None:
            sink.abort()
        if video is not None:
            writer.sync_soon()  # the store to disk while the video's tail is made
            timeline.setdefault("render_ended", time.time())
        writer.end_run(timeline)
        run = writer.run
    if video is not None and not video.local:  # nodes reading the store: before the rename
        _finish_video(session, video, run)
    packing = _Compaction(path, plan)  # beside the video's tail where the video is made here
    if video is not None and video.local:
        try:
            _finish_video(session, video, run)
        except BaseException:
            packing.wait_unless_interrupted()
            raise
    packed = packing.result()
    if session.video_path is not None and session.job is not None:  # the writer has closed
        from farm.encode import record

        record.remember(session.store_path, session.video_path, session.job)
    if options.progress and (report is not None or sink):
        with Store(session.store_path) as store:
            lines = timeline_lines(store.status()["run"])
        print("\n".join(f"farm: {line}" for line in lines), file=sys.stderr)
    if options.progress and packed is not None:
        print(f"farm: store compacted in {packed.seconds:.1f} s: {space.human(packed.length)} on "
              f"disk and in copies ({space.human(packed.length_before)} long while it rendered)",
              file=sys.stderr)
    return report


def _finish_video(session: Session, sink: VideoSink, run: int) -> None:
    """Wait for the video; its figures into the run's row (the writer has closed)."""
    from farm.store import runs

    session.video_path = sink.finish()
    now = time.time()
    runs.update(session.store_path, run, {"video_ended": now, "ended": now, "color_s": sink.color_s,
                                          "encode_s": sink.write_s, "video_frames": sink.written})


class _Compaction:
    """farm/store/compact.py's compaction of a complete store, on a thread of its own so
    that it runs while the video's tail is made: the video's process reads the store
    through descriptors it opened before (farm/store/reader.py), which keep reading the
    store as it was after the compacted copy is renamed over it. A daemon thread: an
    interrupt does not wait for it (a compaction killed before its rename leaves the
    store as the render left it)."""

    def __init__(self, path: Path, plan: Plan):
        self.path, self.plan = path, plan
        self.packed: Any = None
        self.error: OSError | None = None
        self._thread = threading.Thread(target=self._run, name="farm-compact", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from farm.store import compact

        try:
            self.packed = compact.compact(self.path, self.plan)  # None: not complete, or before
        except OSError as err:  # the store is complete as it is: the render succeeded
            self.error = err

    def wait_unless_interrupted(self) -> None:
        with contextlib.suppress(KeyboardInterrupt):
            self._thread.join()

    def result(self) -> Any:
        """The Compaction (or None); on an OSError, None and one line on stderr."""
        from farm.store import compact

        self._thread.join()
        err, path = self.error, self.path
        if err is None:
            return self.packed
        st = path.stat()
        why = (f"{err.strerror}: free space first" if isinstance(err, compact.NoRoom)
               else space.disk_full_reason(path, err) if space.is_disk_full(err)
               else f"compacting it failed ({err.strerror or err})")
        print(f"farm: {path} stays sparse, {space.human(st.st_size)} long for "
              f"{space.human(st.st_blocks * 512)} on disk (copies that keep no holes take its "
              f"length): {why}; `farm resume {path}` compacts it", file=sys.stderr)
        return None


def video_in_place(session: Session) -> bool:
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


def _render(session: Session, writer: StoreWriter, link: transport.MasterLink,
            pending: list[tuple[int, int]], timeline: dict[str, float]) -> MasterReport:
    """The master loop over the pending tiles, with progress and the timeline's
    render part (into ``timeline``)."""
    plan, options = session.plan, session.options
    clock = RunClock(WorkEstimate(writer.done, writer.meta["tiles/seconds"], plan_shape(plan)),
                     workers=len(link.workers))  # the bar's work done and time left
    device_s = [0.0]  # this run's device seconds so far
    worker_counters: dict[int, tuple[float, ...]] = {}  # each worker's latest totals

    def observe(batch: list) -> None:
        for r in batch:
            clock.add(r.frame, r.tile, r.seconds)
            device_s[0] += r.seconds
            worker_counters[r.rank] = r.counters

    bar = Progress(plan.tasks, "render", done=plan.tasks - len(pending), work=clock.reading)
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


def finish(report: MasterReport | None, session: Session) -> int:
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


def check_paths(store_path: Path, video: str, options: RenderOptions) -> None:
    """Every output path, before any work: one line and exit 2 for a path that
    cannot be written."""
    specmod.check_writable(store_path, "output.store")
    if options.video:
        specmod.check_writable(video, "output.video")
