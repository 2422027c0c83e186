"""Which tile goes where: the master's decisions as a pure function of events.

:class:`Scheduler` knows nothing of MPI, threads or files. The master feeds it
events (a worker joined, finished a tile, failed, fell silent, a signal came, time
passed) and carries out the instructions it returns (assign a task, store a
result, release a worker, end). Tests drive it with event lists and compare the
instructions (tests/test_schedule_state.py).

Rules:

* Tasks are tiles ``(frame, tile)``, handed out in frame order, on demand: each
  worker holds up to ``depth`` tasks, or fewer when it asks for fewer as it joins
  (a worker holds tiles on its device and while their results are packed: a GPU
  wants more than a CPU, whose tiles take long), so it always has the next tile
  queued.
* Every assignment carries an attempt number. A result counts only if it answers
  the current attempt of a tile still in flight; any other result is dropped.
* A failed tile goes back to the front of the queue and is retried, on another
  worker where one is left, until ``max_attempts``; after that it is given up and
  the render ends as failed once everything else is done.
* A worker that fails ``worker_failures`` tiles in a row is excluded; a worker not
  heard from for ``timeout`` seconds is lost. Either way its tiles are re-queued.
* A stop request ends assignments; the render ends once nothing is in flight or
  ``grace`` seconds have passed, whichever comes first; a second stop request ends it
  at once. A halt (the store cannot take
  more results: its disk is full) ends it at once.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

Key = tuple[int, int]  # (frame, tile)


@dataclass(frozen=True)
class Task:
    frame: int
    tile: int
    attempt: int

    @property
    def key(self) -> Key:
        return (self.frame, self.tile)


# ---------------------------------------------------------------------------- events


@dataclass(frozen=True)
class Joined:
    worker: int
    capacity: int = 0  # tasks the worker can use at once (0: the scheduler's depth)


@dataclass(frozen=True)
class Finished:
    worker: int
    task: Task
    payload: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Failed:
    worker: int
    task: Task
    error: str = field(default="", compare=False)


@dataclass(frozen=True)
class Heard:
    """A heartbeat: the worker is alive and busy."""

    worker: int


@dataclass(frozen=True)
class Lost:
    """The transport says the worker is gone (it could not start, or died)."""

    worker: int
    reason: str = ""


@dataclass(frozen=True)
class Tick:
    """Time passes (checked for silent workers and the stop grace period)."""


@dataclass(frozen=True)
class StopRequested:
    reason: str = "stop requested"
    at_once: bool = False  # Ctrl-C at a terminal: no grace period for the tiles in flight


@dataclass(frozen=True)
class Halt:
    """Stop at once, keeping nothing in flight (the store cannot take more: a full
    disk). The render ends as interrupted, so it can be resumed."""

    reason: str


Event = Joined | Finished | Failed | Heard | Lost | Tick | StopRequested | Halt

# ---------------------------------------------------------------------------- instructions


@dataclass(frozen=True)
class Assign:
    worker: int
    task: Task


@dataclass(frozen=True)
class Store:
    worker: int
    task: Task
    payload: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Release:
    """Tell the worker to stop (the render ended, or the worker is excluded)."""

    worker: int


@dataclass(frozen=True)
class Note:
    """Something the user should hear about (a retry, an exclusion)."""

    text: str


@dataclass(frozen=True)
class End:
    """The render is over: ``status`` is "finished", "failed" or "interrupted"."""

    status: str
    reason: str = ""


Instruction = Assign | Store | Release | Note | End


@dataclass
class _Worker:
    joined: bool = False
    gone: bool = False
    failures_in_row: int = 0
    last_heard: float = 0.0
    capacity: int = 0  # tasks it holds at most (0: the scheduler's depth)
    tasks: dict[Key, int] = field(default_factory=dict)  # key -> attempt


class Scheduler:
    def __init__(self, tasks: list[Key], workers: list[int], *, now: float = 0.0,
                 depth: int = 2, max_attempts: int = 3, worker_failures: int = 3,
                 timeout: float = 300.0, grace: float = 30.0):
        self.pending: deque[Key] = deque(tasks)
        self.workers = {w: _Worker(last_heard=now) for w in workers}
        self.depth = depth
        self.max_attempts = max_attempts
        self.worker_failures = worker_failures
        self.timeout = timeout
        self.grace = grace
        self.attempts: dict[Key, int] = {}
        self.owner: dict[Key, tuple[int, int]] = {}  # key -> (worker, attempt)
        self.failed_on: dict[Key, set[int]] = {}
        self.given_up: dict[Key, str] = {}
        self.stop_deadline: float | None = None
        self.stop_reason = ""
        self.stop_now = False  # a second stop request came
        self.ended: End | None = None

    # ------------------------------------------------------------------ queries
    @property
    def in_flight(self) -> int:
        return len(self.owner)

    def live(self) -> list[int]:
        return [w for w, s in self.workers.items() if not s.gone]

    # ------------------------------------------------------------------ events
    def handle(self, event: Event, now: float) -> list[Instruction]:
        if self.ended is not None:
            return []
        out: list[Instruction] = []
        if isinstance(event, Joined):
            w = self.workers[event.worker]
            w.joined, w.last_heard = True, now
            w.capacity = min(self.depth, event.capacity) if event.capacity > 0 else self.depth
        elif isinstance(event, Heard):
            self.workers[event.worker].last_heard = now
        elif isinstance(event, Finished):
            self._finished(event, now, out)
        elif isinstance(event, Failed):
            self._failed(event, now, out)
        elif isinstance(event, Lost):
            self._drop_worker(event.worker, f"worker {event.worker} lost: {event.reason}", out)
        elif isinstance(event, StopRequested):
            if event.at_once:  # the person at the terminal wants the prompt back now
                self.stop_deadline = now
                self.stop_reason = event.reason
                self.stop_now = True
                if self.in_flight:
                    out.append(Note(f"{event.reason}: stopping now; the {self.in_flight} tile(s) in "
                                    "flight are rendered again on resume"))
            elif self.stop_deadline is None:
                self.stop_deadline = now + self.grace
                self.stop_reason = event.reason
                out.append(Note(f"{event.reason}: finishing {self.in_flight} tile(s) in flight "
                                f"(at most {self.grace:g} s; stop again to stop now)"))
            else:  # a second stop: the user will not wait for the grace period
                self.stop_deadline = now
                self.stop_reason = f"{self.stop_reason}, then a second stop ({event.reason})"
                self.stop_now = True
        elif isinstance(event, Halt):
            self.ended = End("interrupted", event.reason)
            return [*(Release(w) for w in self.live()), self.ended]
        elif isinstance(event, Tick):
            for wid, w in self.workers.items():
                if not w.gone and w.tasks and now - w.last_heard > self.timeout:
                    self._drop_worker(wid, f"worker {wid} silent for {now - w.last_heard:.0f} s", out)
        self._fill_all(out)
        self._check_end(now, out)
        return out

    def _finished(self, ev: Finished, now: float, out: list[Instruction]) -> None:
        w = self.workers[ev.worker]
        w.last_heard = now
        key = ev.task.key
        w.tasks.pop(key, None)
        if self.owner.get(key) != (ev.worker, ev.task.attempt):
            return  # superseded attempt (reassigned after a timeout): drop it
        del self.owner[key]
        w.failures_in_row = 0
        out.append(Store(ev.worker, ev.task, ev.payload))

    def _failed(self, ev: Failed, now: float, out: list[Instruction]) -> None:
        w = self.workers[ev.worker]
        w.last_heard = now
        key = ev.task.key
        w.tasks.pop(key, None)
        if self.owner.get(key) != (ev.worker, ev.task.attempt):
            return
        del self.owner[key]
        w.failures_in_row += 1
        self.failed_on.setdefault(key, set()).add(ev.worker)
        self._requeue(key, f"tile {key} failed on worker {ev.worker}: {ev.error}", out)
        if w.failures_in_row >= self.worker_failures:
            self._drop_worker(ev.worker, f"worker {ev.worker} excluded after "
                              f"{w.failures_in_row} failures in a row", out)

    def _requeue(self, key: Key, why: str, out: list[Instruction]) -> None:
        if self.attempts.get(key, 0) >= self.max_attempts:
            self.given_up[key] = why
            out.append(Note(f"giving up on tile {key} after {self.attempts[key]} attempts: {why}"))
        else:
            self.pending.appendleft(key)
            out.append(Note(f"retrying: {why}"))

    def _drop_worker(self, wid: int, why: str, out: list[Instruction]) -> None:
        w = self.workers[wid]
        if w.gone:
            return
        w.gone = True
        out.append(Note(why))
        out.append(Release(wid))
        for key in sorted(w.tasks, reverse=True):  # keep frame order at the queue's front
            if self.owner.get(key, (None,))[0] == wid:
                del self.owner[key]
                self.pending.appendleft(key)
        w.tasks.clear()

    # ------------------------------------------------------------------ assignment
    def _eligible(self, key: Key, wid: int) -> bool:
        """Retries go to a worker the tile has not failed on, while one is left."""
        failed = self.failed_on.get(key)
        return not failed or wid not in failed or set(self.live()) <= failed

    def _fill_all(self, out: list[Instruction]) -> None:
        if self.stop_deadline is not None:
            return
        for wid, w in self.workers.items():
            while w.joined and not w.gone and len(w.tasks) < w.capacity and self.pending:
                key = next((k for k in self.pending if self._eligible(k, wid)), None)
                if key is None:
                    break
                self.pending.remove(key)
                attempt = self.attempts.get(key, 0) + 1
                self.attempts[key] = attempt
                self.owner[key] = (wid, attempt)
                w.tasks[key] = attempt
                out.append(Assign(wid, Task(key[0], key[1], attempt)))

    def _check_end(self, now: float, out: list[Instruction]) -> None:
        end: End | None = None
        if self.stop_deadline is not None:
            if not self.owner:
                end = End("interrupted", self.stop_reason)
            elif now >= self.stop_deadline:
                when = "" if self.stop_now else " after the grace period"
                end = End("interrupted", f"{self.stop_reason}; {self.in_flight} tile(s) "
                          f"still in flight{when} are dropped")
        elif not self.pending and not self.owner:
            if self.given_up:
                end = End("failed", f"{len(self.given_up)} tile(s) failed on every attempt; "
                          f"first: {next(iter(self.given_up.values()))}")
            else:
                end = End("finished")
        elif not self.live():
            end = End("failed", "no worker left")
        if end is not None:
            self.ended = end
            out.extend(Release(w) for w in self.live())
            out.append(end)
