"""Waiting for OpenCL commands without burning a core.

NVIDIA's ``clWaitForEvents`` and blocking copies spin: every thread that waits keeps a
core busy (the video's frame threads, waiting for their colours, took more CPU than
x264 could spare on a 16-core GPU host). :func:`wait_quietly` sleeps between looks at
the events' status instead, which also lets go of the interpreter lock.
"""

from __future__ import annotations

import time

import pyopencl as cl

POLL_S = 0.0002


def wait_quietly(events: list[cl.Event], poll: float = POLL_S) -> None:
    """Return once every event is complete; raise if a command failed."""
    complete = cl.command_execution_status.COMPLETE
    for event in events:
        while event.command_execution_status > complete:  # queued, submitted, running
            time.sleep(poll)
    cl.wait_for_events(events)  # complete (or failed: this raises) by now
