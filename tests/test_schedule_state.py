"""The scheduler as a pure function: event sequences in, instruction lists out."""

from __future__ import annotations

from farm.schedule.state import (
    Assign,
    End,
    Failed,
    Finished,
    Halt,
    Heard,
    Joined,
    Lost,
    Note,
    Release,
    Scheduler,
    StopRequested,
    Store,
    Task,
    Tick,
)


def T(frame, tile, attempt=1):
    return Task(frame, tile, attempt)


def plain(instructions):
    """Instructions without the free-text notes."""
    return [i for i in instructions if not isinstance(i, Note)]


def test_tiles_on_demand_in_frame_order():
    s = Scheduler([(0, 0), (0, 1), (1, 0), (1, 1), (2, 0)], workers=[1, 2], depth=2)
    assert s.handle(Joined(1), 0) == [Assign(1, T(0, 0)), Assign(1, T(0, 1))]
    assert s.handle(Joined(2), 0) == [Assign(2, T(1, 0)), Assign(2, T(1, 1))]
    assert s.handle(Finished(2, T(1, 0)), 1) == [Store(2, T(1, 0)), Assign(2, T(2, 0))]
    assert s.handle(Finished(1, T(0, 0)), 1) == [Store(1, T(0, 0))]  # nothing left to hand out
    for w, t in ((1, T(0, 1)), (2, T(1, 1))):
        assert s.handle(Finished(w, t), 2) == [Store(w, t)]
    assert s.handle(Finished(2, T(2, 0)), 3) == [Store(2, T(2, 0)), Release(1), Release(2),
                                                 End("finished")]
    assert s.handle(Tick(), 4) == []  # ended: nothing more


def test_failed_tile_is_retried_on_another_worker():
    s = Scheduler([(0, 0), (0, 1)], workers=[1, 2], depth=1)
    s.handle(Joined(1), 0)
    s.handle(Joined(2), 0)
    out = s.handle(Failed(1, T(0, 0), "Traceback ... RuntimeError: boom"), 1)
    notes = [i.text for i in out if isinstance(i, Note)]
    assert notes and "boom" in notes[0]
    # worker 1 is free, but the tile failed there: it waits for worker 2
    assert plain(out) == []
    assert plain(s.handle(Finished(2, T(0, 1)), 2)) == [Store(2, T(0, 1)), Assign(2, T(0, 0, 2))]
    assert plain(s.handle(Finished(2, T(0, 0, 2)), 3)) == [Store(2, T(0, 0, 2)), Release(1),
                                                           Release(2), End("finished")]


def test_result_of_a_superseded_attempt_is_dropped():
    s = Scheduler([(0, 0)], workers=[1, 2], depth=1, timeout=10)
    s.handle(Joined(1), 0)
    s.handle(Joined(2), 0)  # nothing left for worker 2 yet
    out = s.handle(Tick(), 11)  # worker 1 silent for 11 s with a tile: lost, tile reassigned
    assert plain(out) == [Release(1), Assign(2, T(0, 0, 2))]
    assert s.handle(Finished(1, T(0, 0, 1)), 12) == []  # late answer to attempt 1
    assert plain(s.handle(Finished(2, T(0, 0, 2)), 13)) == [Store(2, T(0, 0, 2)), Release(2),
                                                            End("finished")]


def test_heartbeats_keep_a_slow_worker():
    s = Scheduler([(0, 0)], workers=[1], depth=1, timeout=10)
    s.handle(Joined(1), 0)
    for t in (8, 16, 24):
        assert s.handle(Heard(1), t) == []
        assert s.handle(Tick(), t + 5) == []
    assert plain(s.handle(Finished(1, T(0, 0)), 30))[0] == Store(1, T(0, 0))


def test_failing_worker_is_excluded_and_others_finish():
    tiles = [(0, t) for t in range(6)]
    s = Scheduler(tiles, workers=[1, 2], depth=1, worker_failures=2, max_attempts=3)
    s.handle(Joined(1), 0)
    s.handle(Joined(2), 0)
    s.handle(Failed(1, T(0, 0), "x"), 1)
    (key, attempt), = s.workers[1].tasks.items()  # it was given another tile meanwhile
    out = s.handle(Failed(1, T(*key, attempt), "x"), 2)
    assert Release(1) in out and any("excluded" in i.text for i in out if isinstance(i, Note))
    assert not any(isinstance(i, Assign) and i.worker == 1 for i in out)
    done, now = set(), 3
    while s.ended is None:
        (w, task), = s.workers[2].tasks.items()
        done.add(w)
        s.handle(Finished(2, T(*w, task)), now)
        now += 1
    assert s.ended == End("finished") and done == set(tiles)


def test_tile_given_up_after_max_attempts_and_the_render_fails():
    s = Scheduler([(0, 0), (0, 1)], workers=[1, 2, 3], depth=1, max_attempts=2, worker_failures=9)
    for w in (1, 2, 3):
        s.handle(Joined(w), 0)
    s.handle(Failed(1, T(0, 0, 1), "bad tile"), 1)  # retried at once on idle worker 3
    assert s.workers[3].tasks == {(0, 0): 2}
    s.handle(Finished(2, T(0, 1, 1)), 2)
    out = s.handle(Failed(3, T(0, 0, 2), "bad tile"), 3)
    end = out[-1]
    assert isinstance(end, End) and end.status == "failed" and "bad tile" in end.reason


def test_no_worker_left():
    s = Scheduler([(0, 0), (0, 1)], workers=[1, 2], depth=1)
    s.handle(Joined(1), 0)
    s.handle(Lost(2, "DeviceError: no GPU"), 0)
    out = s.handle(Lost(1, "crashed"), 1)
    assert out[-1] == End("failed", "no worker left")


def test_stop_request_drains_in_flight_then_interrupts():
    s = Scheduler([(0, t) for t in range(10)], workers=[1], depth=2, grace=5)
    s.handle(Joined(1), 0)
    out = s.handle(StopRequested("received SIGTERM"), 1)
    assert plain(out) == []  # no new assignments
    assert plain(s.handle(Finished(1, T(0, 0)), 2)) == [Store(1, T(0, 0))]
    out = s.handle(Finished(1, T(0, 1)), 3)
    assert plain(out) == [Store(1, T(0, 1)), Release(1), End("interrupted", "received SIGTERM")]


def test_stop_request_grace_period_expires():
    s = Scheduler([(0, 0), (0, 1)], workers=[1], depth=2, grace=5)
    s.handle(Joined(1), 0)
    s.handle(StopRequested("received SIGUSR1"), 1)
    assert s.handle(Tick(), 3) == []
    out = s.handle(Tick(), 6.5)
    assert isinstance(out[-1], End) and out[-1].status == "interrupted"
    assert "grace" in out[-1].reason


def test_ctrl_c_at_a_terminal_ends_at_once():
    """No grace period for a person at a terminal (issue 44.6): the loop ends at the
    request, and the tiles in flight go back to the store's pending list."""
    s = Scheduler([(0, t) for t in range(4)], workers=[1], depth=2, grace=600)
    s.handle(Joined(1), 0)
    assert s.in_flight == 2
    out = s.handle(StopRequested("received SIGINT", at_once=True), 1)
    assert isinstance(out[-1], End) and out[-1].status == "interrupted"
    notes = [i.text for i in out if isinstance(i, Note)]
    assert notes and "stopping now" in notes[0] and "rendered again on resume" in notes[0]


def test_a_second_stop_request_ends_at_once():
    s = Scheduler([(0, t) for t in range(4)], workers=[1], depth=2, grace=600)
    s.handle(Joined(1), 0)
    s.handle(StopRequested("received SIGINT"), 1)
    assert s.handle(Tick(), 2) == []
    out = s.handle(StopRequested("received SIGINT"), 3)
    assert plain(out) == [Release(1), End("interrupted", "received SIGINT, then a second stop (received "
                                          "SIGINT); 2 tile(s) still in flight are dropped")]


def test_nothing_to_do_ends_at_once():
    s = Scheduler([], workers=[1])
    assert s.handle(Joined(1), 0) == [Release(1), End("finished")]


def test_halt_ends_at_once_as_interrupted():
    """A full disk: nothing more can be stored, so nothing waits for the tiles in flight."""
    s = Scheduler([(0, 0), (0, 1), (0, 2)], [1, 2], depth=1)
    s.handle(Joined(1), 0)
    s.handle(Joined(2), 0)
    out = s.handle(Halt("the disk is full"), 1)
    assert out == [Release(1), Release(2), End("interrupted", "the disk is full")]
    assert s.handle(Finished(1, T(0, 0)), 2) == []  # late results are not stored
