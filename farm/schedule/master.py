"""The master loop: events from the transport into the scheduler, its instructions out.

The master is the only writer of the store's bookkeeping (and of the tiles' bytes
but where workers write their own into the store: farm/store/inplace.py). It polls
the transport, feeds every event to :class:`~farm.schedule.state.Scheduler`, sends
the assignments and hands each batch of accepted results to a writer thread
(:class:`~farm.store.writer.WriterThread`), so it goes on receiving while the disk
works and the workers go on computing. SIGTERM, SIGINT and SIGUSR1 become a stop
request: no new assignments, results in flight are collected for ``grace``
seconds, then the loop ends as "interrupted". Ctrl-C at a terminal (SIGINT with
standard input a terminal) ends it at once: its tiles in flight are rendered again
on resume.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from farm.runtime.progress import Progress
from farm.schedule.state import (
    Assign,
    End,
    Halt,
    Note,
    Release,
    Scheduler,
    StopRequested,
    Store,
    Tick,
)
from farm.schedule.transport import MasterLink
from farm.store.space import disk_full_reason, is_disk_full
from farm.store.writer import Finished, StoreWriter, WriterThread

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)


@dataclass(frozen=True)
class MasterOptions:
    depth: int = 32  # tasks held per worker at most (queued, on the device, being packed)
    max_attempts: int = 3
    worker_failures: int = 3
    timeout: float = 300.0  # seconds a busy worker may stay silent
    grace: float = 30.0  # seconds to collect results in flight after a stop request


@dataclass
class MasterReport:
    end: End
    wall_s: float
    busy_s: float  # the master loop's time deciding and handing out (not waiting)
    writer_busy_s: float  # the writer thread's time writing
    receive_s: float  # time inside MPI receives (0 in one process)
    tiles: int
    in_place: int = 0  # of the tiles, those the workers wrote into the store themselves

    def summary(self) -> str:
        def share(x: float) -> str:
            return f"{x:.1f} s ({100 * x / self.wall_s:.0f}%)" if self.wall_s else "0 s"

        return (f"master: {self.tiles} tile(s) in {self.wall_s:.1f} s; receiving {share(self.receive_s)}, "
                f"deciding {share(self.busy_s)}, writer thread {share(self.writer_busy_s)}")


def _at_a_terminal() -> bool:
    """Whether a person runs this command at a terminal (its standard input is one): their
    Ctrl-C stops at once. A batch system's SIGTERM, or a SIGINT without a terminal, gets
    the grace period."""
    try:
        return os.isatty(0)
    except OSError:
        return False


class _Signals:
    """Turns stop signals into a flag for the loop, and restores handlers after."""

    def __init__(self) -> None:
        self.caught: str | None = None
        self.at_once = False  # the signal was Ctrl-C at a terminal
        self._old: dict[int, object] = {}

    def __enter__(self) -> _Signals:
        for sig in STOP_SIGNALS:
            with contextlib.suppress(ValueError):  # not the main thread: leave signals alone
                self._old[sig] = signal.signal(sig, self._catch)
        return self

    def _catch(self, signum: int, _frame: object) -> None:
        self.caught = signal.Signals(signum).name
        self.at_once = signum == signal.SIGINT and _at_a_terminal()

    def __exit__(self, *exc: object) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)  # type: ignore[arg-type]


def _test_hold() -> tuple[int, str | None]:
    """A testing aid: ``FARM_TEST_HOLD_AT=n[:PATH]``: see :func:`_hold`."""
    tiles, _, until = os.environ.get("FARM_TEST_HOLD_AT", "").partition(":")
    return int(tiles or 0), until or None


def _hold(signals: _Signals, until: str | None) -> None:
    """The loop stops here once n tiles are on their way to the store (FARM_TEST_HOLD_AT),
    until a stop signal or until the file ``until`` exists, so that a test can catch a
    render mid-way however fast or slow the machine is (the writer thread goes on
    writing what it has; workers keep what they hold)."""
    while not signals.caught and not (until and os.path.exists(until)):
        time.sleep(0.01)


def run_master(writer: StoreWriter, link: MasterLink, options: MasterOptions = MasterOptions(),
               progress: Progress | None = None,
               on_batch: Callable[[list[Finished]], None] | None = None,
               on_frame: Callable[[int], None] | None = None) -> MasterReport:
    """Run the render until the scheduler ends it. ``on_batch`` sees every batch of
    accepted results as it goes to the writer (progress, estimates); ``on_frame`` each
    frame once it is complete in the store (the video sink: it must not block)."""
    pending = writer.pending()
    t0 = time.monotonic()
    sched = Scheduler(pending, list(link.workers), now=t0, depth=options.depth,
                      max_attempts=options.max_attempts, worker_failures=options.worker_failures,
                      timeout=options.timeout, grace=options.grace)
    busy = 0.0
    stored = in_place = 0
    hold, until = _test_hold()
    background = WriterThread(writer, on_frame)
    with _Signals() as signals:
        while sched.ended is None:
            events = link.poll(0.05)
            started = time.monotonic()
            if signals.caught:
                events.append(StopRequested(f"received {signals.caught}", at_once=signals.at_once))
                signals.caught = None
            if background.error is not None:
                if not is_disk_full(background.error):
                    raise background.error
                err = background.error
                assert isinstance(err, OSError)
                events.append(Halt(disk_full_reason(writer.path, err)))
            events.append(Tick())
            batch = []
            for event in events:
                for ins in sched.handle(event, time.monotonic()):
                    if isinstance(ins, Assign):
                        link.assign(ins.worker, ins.task)
                    elif isinstance(ins, Store):
                        batch.append(ins.payload)
                    elif isinstance(ins, Release):
                        link.release(ins.worker)
                    elif isinstance(ins, Note):
                        lines = ins.text.strip().splitlines()  # a traceback: say where, and what
                        short = lines[0] if len(lines) == 1 else f"{lines[0]} ... {lines[-1]}"
                        print(f"farm: {short}", file=sys.stderr)
            if batch:
                background.submit(batch)
                stored += len(batch)
                in_place += sum(r.in_place for r in batch)
                if on_batch:
                    on_batch(batch)
                if progress:
                    progress.advance(len(batch))
                if hold and stored >= hold:
                    hold = 0
                    _hold(signals, until)
            busy += time.monotonic() - started
        background.close()  # everything received is written before the loop ends
        if background.error is not None and not is_disk_full(background.error):
            raise background.error
    assert isinstance(sched.ended, End)
    return MasterReport(sched.ended, time.monotonic() - t0, busy, background.busy_s,
                        getattr(link, "receive_s", 0.0), stored, in_place)
