"""Messages between master and workers: in one process (threads) or over MPI.

Both transports give the master a :class:`MasterLink` and each worker a
:class:`WorkerLink`; the master and worker loops do not know which one they use.
This is the one module that imports mpi4py, and only when MPI is in use.

MPI messages are numpy buffers sent with mpi4py's buffer (uppercase) calls, never
pickles, except the plan and the store's codec, broadcast once at start. A tile
result is a header and one message per channel of the plan (farm/plan/channels.py),
each the channel's chunk as the store keeps it (packed by the worker: compressed,
farm/store/codec.py), so the master receives and writes the compressed bytes::

    TAG_RESULT       int64 header: frame, tile, attempt, nbins, kernel ns, rank, crc,
                     in place (1: the worker wrote the payloads into the store itself),
                     the worker's running totals in ns (farm.runtime.timeline.WORKER_COUNTERS),
                     then each channel's payload length in bytes; then int64[nbins]
                     bins, int64[nbins] counts
    TAG_CHANNEL + k  channel k's payload, in the plan's order (none for a tile written
                     in place: farm/store/inplace.py)
    TAG_READY        int64[1]: the tasks the worker can hold (Joined.capacity)

The master polls with ``Iprobe`` and a growing sleep (0.1 ms up to 1 ms), so it
notices signals and silent workers while it waits, and answers a worker's blocking
send of a result within a millisecond.

No rank waits in a blocking collective: MPI libraries wait there by polling, a core
each, and the ranks that wait for the master (while it plans and computes references,
or encodes the video at the end) would take the cores it works on (seen: a 3-rank
render on 2 cores 3.7x slower than one process, most of it in the kernel's scheduler).
:func:`quiet_bcast` and :func:`quiet_gather` first wait for a small TAG_SYNC message by
probing with sleeps, then call the collective, which no longer waits.

Shutdown: the master's STOP is the last message it sends a worker; the worker's BYE
is the last message it sends back. MPI keeps the order of messages between two
ranks, so once the master has every BYE no message is left unreceived on either side
(MPI_Finalize refuses a communicator with unmatched messages).
"""

from __future__ import annotations

import os
import queue
import sys
import time
from typing import Protocol

import numpy as np

from farm.plan import Channel
from farm.runtime.cores import KEEP_BINDING, launched_by_mpi, release_launcher_binding
from farm.runtime.timeline import WORKER_COUNTERS
from farm.schedule.state import Event, Failed, Finished, Heard, Joined, Lost, Task
from farm.store.writer import Finished as Stored

(TAG_TASK, TAG_STOP, TAG_READY, TAG_RESULT, TAG_FAILED, TAG_HEARTBEAT, TAG_LOST,
 TAG_BYE, TAG_SYNC) = range(9)
TAG_CHANNEL = 16  # + the channel's index in the plan
IN_PLACE = 7  # the header's field saying the payloads stayed with the worker
FIXED = 8 + len(WORKER_COUNTERS)  # the header's fields before the payload lengths


class MasterLink(Protocol):
    workers: list[int]

    def poll(self, timeout: float) -> list[Event]: ...
    def assign(self, worker: int, task: Task) -> None: ...
    def release(self, worker: int) -> None: ...


class WorkerLink(Protocol):
    rank: int

    def ready(self, capacity: int = 0) -> None: ...
    def lost(self, error: str) -> None: ...
    def result(self, task: Task, result: Stored) -> None: ...
    def failed(self, task: Task, error: str) -> None: ...
    def heartbeat(self) -> None: ...
    def receive(self, timeout: float) -> list[Task | None]: ...  # None: stop
    def close(self) -> None: ...


# ============================================================================ threads


def _drain(q: queue.Queue, timeout: float) -> list:
    """Everything in ``q``, waiting up to ``timeout`` for the first item."""
    try:
        items = [q.get(timeout=timeout) if timeout > 0 else q.get_nowait()]
    except queue.Empty:
        return []
    while True:
        try:
            items.append(q.get_nowait())
        except queue.Empty:
            return items


class ThreadMaster:
    """Master side of workers that run as threads of this process."""

    def __init__(self, workers: list[int]):
        self.workers = workers
        self.inbox: queue.Queue[Event] = queue.Queue()
        self.outboxes: dict[int, queue.Queue[Task | None]] = {w: queue.Queue() for w in workers}

    def poll(self, timeout: float) -> list[Event]:
        return _drain(self.inbox, timeout)

    def assign(self, worker: int, task: Task) -> None:
        self.outboxes[worker].put(task)

    def release(self, worker: int) -> None:
        self.outboxes[worker].put(None)

    def link(self, worker: int) -> ThreadWorker:
        return ThreadWorker(worker, self.inbox, self.outboxes[worker])


class ThreadWorker:
    def __init__(self, rank: int, inbox: queue.Queue, outbox: queue.Queue):
        self.rank, self._to_master, self._from_master = rank, inbox, outbox

    def ready(self, capacity: int = 0) -> None:
        self._to_master.put(Joined(self.rank, capacity))

    def lost(self, error: str) -> None:
        self._to_master.put(Lost(self.rank, error))

    def result(self, task: Task, result: Stored) -> None:
        self._to_master.put(Finished(self.rank, task, result))  # by reference

    def failed(self, task: Task, error: str) -> None:
        self._to_master.put(Failed(self.rank, task, error))

    def heartbeat(self) -> None:
        self._to_master.put(Heard(self.rank))

    def receive(self, timeout: float) -> list[Task | None]:
        return _drain(self._from_master, timeout)

    def close(self) -> None:
        pass


# ============================================================================ MPI


def mpi_world():
    """COMM_WORLD when this process was started by an MPI launcher with more than
    one process, else None (then mpi4py is not even imported)."""
    if not launched_by_mpi() and "mpi4py.MPI" not in sys.modules:
        return None
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    if comm.Get_size() == 1:
        return None
    gained = release_launcher_binding()  # before the farm starts its threads
    if gained and comm.Get_rank() == 0:
        print(f"farm: the launcher bound each rank to one core; the farm's ranks run on all "
              f"{gained + 1} this machine lets them ({KEEP_BINDING}=1 keeps the binding)",
              file=sys.stderr)
    return comm


def _await_sync(comm, source: int, max_sleep: float = 0.05) -> None:
    """Receive the TAG_SYNC message from ``source``, probing with sleeps of 0.1 ms
    doubling up to ``max_sleep`` (no core spent waiting)."""
    sleep = 0.0001
    while not comm.Iprobe(source=source, tag=TAG_SYNC):
        time.sleep(sleep)
        sleep = min(sleep * 2, max_sleep)
    comm.recv(source=source, tag=TAG_SYNC)


def quiet_bcast(comm, obj=None):
    """``comm.bcast(obj, root=0)`` in which the other ranks wait sleeping, not polling."""
    if comm.Get_rank() == 0:
        for rank in range(1, comm.Get_size()):
            comm.send(None, dest=rank, tag=TAG_SYNC)
    else:
        _await_sync(comm, 0)
    return comm.bcast(obj, root=0)


def quiet_gather(comm, obj):
    """``comm.gather(obj, root=0)`` in which rank 0 waits sleeping, not polling."""
    if comm.Get_rank() == 0:
        for rank in range(1, comm.Get_size()):
            _await_sync(comm, rank)
    else:
        comm.send(None, dest=0, tag=TAG_SYNC)
    return comm.gather(obj, root=0)


def leave(status: int) -> int:
    """The exit status for this process, so that mpiexec reports the master's.

    Without MPI this is ``status``. Under MPI every rank takes the master's status and
    finalizes MPI before it exits: MPICH's launcher reports the status of the ranks it
    sees exit, and once some ranks have exited after finalizing it may end the others
    without waiting for their status (seen with MPICH 5.0: a master exiting 1 a moment
    after its workers exited 0 gave mpiexec status 0)."""
    if "mpi4py.MPI" not in sys.modules:
        return status
    from mpi4py import MPI

    if not MPI.Is_initialized() or MPI.Is_finalized() or MPI.COMM_WORLD.Get_size() == 1:
        return status
    comm = MPI.COMM_WORLD
    status = quiet_bcast(comm, status if comm.Get_rank() == 0 else None)
    MPI.Finalize()
    return int(status)


def bcast_array(comm, array: np.ndarray | None) -> np.ndarray | None:
    """Broadcast a float64 array (or None) from rank 0 with one buffer (uppercase)
    Bcast; its shape goes first. The reference orbit reaches the workers this way."""
    shape = quiet_bcast(comm, None if array is None else array.shape)
    if shape is None:
        return None
    buf = np.ascontiguousarray(array, dtype=np.float64) if comm.Get_rank() == 0 else np.empty(shape)
    comm.Bcast(buf, root=0)
    return buf


def node_worker_index(comm) -> tuple[int, int, str]:
    """(index of this rank among the worker ranks of its node, the node's worker ranks,
    host name).

    A node is the ranks that share memory (MPI_COMM_TYPE_SHARED), or, where the
    environment variable FARM_NODE is set, the ranks that give it the same value (a test
    knob: ``mpiexec -n 2 -env FARM_NODE a ... : -n 2 -env FARM_NODE b ...`` makes one
    machine two nodes, each binding its workers to devices from its first).

    Collective: every rank, the master too, must call it."""
    from mpi4py import MPI

    rank = comm.Get_rank()
    name = os.environ.get("FARM_NODE")
    if name is not None:
        names = comm.allgather(name)
        node = comm.Split(sorted(set(names)).index(name), key=rank)
        host = f"{MPI.Get_processor_name()}/{name}"
    else:
        node = comm.Split_type(MPI.COMM_TYPE_SHARED, key=rank)
        host = MPI.Get_processor_name()
    ranks = node.allgather(rank)
    node.Free()
    workers_here = [r for r in ranks if r != 0]
    index = workers_here.index(rank) if rank != 0 else -1
    return index, len(workers_here), host


def _text(data: str) -> np.ndarray:
    return np.frombuffer(data.encode("utf-8", "replace"), dtype=np.uint8).copy()


def _task_buffer(task: Task) -> np.ndarray:
    return np.array([task.frame, task.tile, task.attempt], dtype=np.int64)


def result_header(task: Task, result: Stored) -> np.ndarray:
    """The first of a result's messages: header, then the sparse histogram."""
    header = np.array([task.frame, task.tile, task.attempt, len(result.hist_bins),
                       int(result.seconds * 1e9), result.rank, result.crc, int(result.in_place),
                       *(int(s * 1e9) for s in result.counters),
                       *result.stored_lengths()], dtype=np.int64)
    return np.concatenate([header, result.hist_bins, result.hist_counts])


def payload_lengths(header: np.ndarray, channels: int) -> list[int]:
    """The channel payloads' lengths a result header announces."""
    return [int(x) for x in header[FIXED:FIXED + channels]]


def result_from(header: np.ndarray, payloads: list[np.ndarray],
                channels: tuple[Channel, ...]) -> tuple[Task, Stored]:
    """A result from its header and its channel messages."""
    frame, tile, attempt, n, ns, rank, crc = (int(x) for x in header[:7])
    counters = tuple(int(x) * 1e-9 for x in header[IN_PLACE + 1:FIXED])
    start = FIXED + len(channels)
    bins, counts = header[start:start + n], header[start + n:start + 2 * n]
    in_place = bool(header[IN_PLACE])
    lengths = tuple(payload_lengths(header, len(channels))) if in_place else ()
    return Task(frame, tile, attempt), Stored(frame, tile, [p.data for p in payloads], bins, counts,
                                              ns * 1e-9, rank, crc, counters, in_place, lengths)


def _collect(comm, source: int, timeout: float, max_sleep: float = 0.001,
             timer: list[float] | None = None,
             channels: tuple[Channel, ...] = ()) -> list[tuple[int, int, np.ndarray]]:
    """Receive every message waiting from ``source`` as (source, tag, bytes); when
    none is waiting, probe again after 0.1 ms, doubling up to ``max_sleep``, until
    ``timeout``. A result's channel messages are received right after its header.
    ``timer[0]`` accumulates the seconds spent receiving."""
    from mpi4py import MPI

    status = MPI.Status()
    deadline = time.monotonic() + timeout
    sleep = 0.0001
    out: list[tuple[int, int, np.ndarray]] = []
    while True:
        t0 = time.monotonic()
        while comm.Iprobe(source=source, tag=MPI.ANY_TAG, status=status):
            buf = np.empty(status.Get_count(MPI.BYTE), dtype=np.uint8)
            src, tag = status.Get_source(), status.Get_tag()
            comm.Recv([buf, MPI.BYTE], source=src, tag=tag)
            out.append((src, tag, buf))
            if tag == TAG_RESULT and not buf[IN_PLACE * 8:(IN_PLACE + 1) * 8].view(np.int64)[0]:
                # its payloads follow at once, from the same worker
                lengths = payload_lengths(buf[:(FIXED + len(channels)) * 8].view(np.int64), len(channels))
                for k, n in enumerate(lengths):
                    arr = np.empty(n, dtype=np.uint8)
                    comm.Recv([arr, MPI.BYTE], source=src, tag=TAG_CHANNEL + k)
                    out.append((src, TAG_CHANNEL + k, arr))
        if timer is not None and out:
            timer[0] += time.monotonic() - t0
        remaining = deadline - time.monotonic()
        if out or remaining <= 0:
            return out
        time.sleep(min(sleep, remaining))
        sleep = min(sleep * 2, max_sleep)


class MpiMaster:
    def __init__(self, comm, channels: tuple[Channel, ...]):
        from mpi4py import MPI

        self.MPI = MPI
        self.comm = comm
        self.channels = channels
        self.workers = list(range(1, comm.Get_size()))
        self._sends: list = []
        self._released: set[int] = set()
        self._said_bye: set[int] = set()
        self._receive = [0.0]

    @property
    def receive_s(self) -> float:
        return self._receive[0]

    def poll(self, timeout: float) -> list[Event]:
        messages = _collect(self.comm, self.MPI.ANY_SOURCE, timeout, timer=self._receive,
                            channels=self.channels)
        self._sends = [r for r in self._sends if not r[0].Test()]
        events: list[Event] = []
        n = len(self.channels)
        for k, (src, tag, buf) in enumerate(messages):
            if tag == TAG_BYE:
                self._said_bye.add(src)
            elif tag == TAG_RESULT:
                header = buf.view(np.int64)
                arrays = [] if header[IN_PLACE] else [m[2] for m in messages[k + 1:k + 1 + n]]
                task, result = result_from(header, arrays, self.channels)
                events.append(Finished(src, task, result))
            elif tag < TAG_CHANNEL:
                events.append(self._event(src, tag, buf))
        return events

    def _event(self, src: int, tag: int, buf: np.ndarray) -> Event:
        if tag == TAG_FAILED:
            frame, tile, attempt = (int(x) for x in buf[:24].view(np.int64))
            return Failed(src, Task(frame, tile, attempt), bytes(buf[24:]).decode("utf-8", "replace"))
        if tag == TAG_READY:
            return Joined(src, int(buf.view(np.int64)[0]) if len(buf) >= 8 else 0)
        if tag == TAG_HEARTBEAT:
            return Heard(src)
        if tag == TAG_LOST:
            return Lost(src, bytes(buf).decode("utf-8", "replace"))
        raise RuntimeError(f"unexpected message tag {tag} from rank {src}")

    def _isend(self, buf: np.ndarray, dest: int, tag: int) -> None:
        req = self.comm.Isend([buf, self.MPI.BYTE], dest=dest, tag=tag)
        self._sends.append((req, buf))  # keep the buffer alive until sent

    def assign(self, worker: int, task: Task) -> None:
        self._isend(_task_buffer(task).view(np.uint8), worker, TAG_TASK)

    def release(self, worker: int) -> None:
        if worker not in self._released:
            self._released.add(worker)
            self._isend(np.zeros(0, dtype=np.uint8), worker, TAG_STOP)

    def drain(self, seconds: float = 30.0) -> None:
        """After releasing every worker: receive (and drop) what they still send until
        each has said BYE, and wait for our own sends (bounded: a dead worker never
        answers, and then MPI ends the job anyway)."""
        deadline = time.monotonic() + seconds
        while (self._sends or set(self.workers) - self._said_bye) and time.monotonic() < deadline:
            self.poll(0.01)


class MpiWorker:
    def __init__(self, comm):
        from mpi4py import MPI

        self.MPI = MPI
        self.comm = comm
        self.rank = comm.Get_rank()
        self._sends: list = []

    def _send(self, buf: np.ndarray, tag: int) -> None:
        req = self.comm.Isend([buf, self.MPI.BYTE], dest=0, tag=tag)
        self._sends.append((req, buf))
        self._sends = [r for r in self._sends if not r[0].Test()]

    def ready(self, capacity: int = 0) -> None:
        self._send(np.array([capacity], dtype=np.int64).view(np.uint8), TAG_READY)

    def lost(self, error: str) -> None:
        self._send(_text(error), TAG_LOST)

    def result(self, task: Task, result: Stored) -> None:
        """A blocking send: MPI moves a large message only while both sides are inside
        MPI calls, and the master receives at once. An Isend left to progress between
        GPU waits took ~230 ms for 2 MB (Open MPI, fragments, 2026-11-21 on an H200)."""
        MPI = self.MPI
        self.comm.Send([result_header(task, result), MPI.BYTE], dest=0, tag=TAG_RESULT)
        if result.in_place:  # (the payloads are in the store: farm/store/inplace.py)
            return
        for k, payload in enumerate(result.payloads):
            self.comm.Send([np.frombuffer(payload, dtype=np.uint8), MPI.BYTE], dest=0,
                           tag=TAG_CHANNEL + k)

    def failed(self, task: Task, error: str) -> None:
        self._send(np.concatenate([_task_buffer(task).view(np.uint8), _text(error)]), TAG_FAILED)

    def heartbeat(self) -> None:
        self._send(np.zeros(0, dtype=np.uint8), TAG_HEARTBEAT)

    def receive(self, timeout: float) -> list[Task | None]:
        msgs: list[Task | None] = []
        for _, tag, buf in _collect(self.comm, 0, timeout, max_sleep=0.02):
            if tag == TAG_STOP:
                msgs.append(None)
            else:
                frame, tile, attempt = (int(x) for x in buf.view(np.int64))
                msgs.append(Task(frame, tile, attempt))
        return msgs

    def close(self) -> None:
        """Say BYE (our last message) and wait until the master has received everything."""
        self._send(np.zeros(0, dtype=np.uint8), TAG_BYE)
        deadline = time.monotonic() + 60.0
        while self._sends and time.monotonic() < deadline:
            self._sends = [r for r in self._sends if not r[0].Test()]
            time.sleep(0.001)
