"""A new render's reference orbits, computed in a process of their own as `farm render`
starts.

`farm render` needs the references of its perturbed frames (farm/plan/references.py)
before it creates the store, and computed them after its own imports and the device's
choice: on a 16-core H100 host the heavy 1080p zoom's first kernel came at 0.80-1.33 s,
0.26-0.42 s of it the orbits, one core busy and the rest waiting (BENCHMARKS.md,
fifteenth session). :func:`begin`, called as the command starts, forks it (before any
thread of the command exists; elsewhere it runs ``python -m farm.run.early_refs JOB``): the
child reads the job file, makes the plan and its references
exactly as the command would, and hands them back pickled with the lines the command
prints about them, while the command imports its modules and finds its device. The
store's preparation then :meth:`~EarlyReferences.take` s them, if the child's job is the
command's (the same canonical text) and it finished well; otherwise the command
computes them itself, as before. A store that resumes (it holds its references) or a
command that stops on bad input ends the child unread: it writes nothing.

Only where it can pay: not under an MPI launcher (rank 0 computes and broadcasts them),
and on a machine of at least MIN_CORES cores (on two, the child would take the core the
command's start needs); FARM_EARLY_REFERENCES=1 asks for it anyway, =0 never. A location
file is not a job file: its child fails at once and the command computes its
references itself.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, TYPE_CHECKING

from farm.runtime.cores import launched_by_mpi, usable_cores

if TYPE_CHECKING:
    from farm.plan.reference_types import References
    from farm.spec import JobSpec

MIN_CORES = 4
ENV = "FARM_EARLY_REFERENCES"


class EarlyReferences:
    """The child computing a job file's references (see the module's docstring): a fork
    of the command made before it starts any thread (the modules it has imported come
    with it), else ``python -m farm.run.early_refs JOB``."""

    def __init__(self, job: str | os.PathLike[str]):
        self.pid: int | None = None
        self.proc: subprocess.Popen | None = None
        if hasattr(os, "fork") and threading.active_count() == 1:
            read, write = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: its answer down the pipe, then out, running nothing else
                os.close(read)
                status = 1
                try:
                    with os.fdopen(write, "wb") as out:
                        out.write(_computed(str(job)))
                    status = 0
                finally:
                    os._exit(status)  # (no atexit, no flush of the command's buffers)
            os.close(write)
            self.pid = pid
            self._out: IO[bytes] = os.fdopen(read, "rb")
        else:
            package_root = str(Path(__file__).resolve().parents[1])  # the child imports this farm
            path = os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))
            self.proc = subprocess.Popen([sys.executable, "-m", "farm.run.early_refs", str(job)],
                                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, env=dict(os.environ, PYTHONPATH=path))
            assert self.proc.stdout is not None
            self._out = self.proc.stdout

    def _wait(self) -> bool:
        """Reap the child; whether it ended well."""
        if self.pid is not None:
            _, status = os.waitpid(self.pid, 0)
            self.pid = None
            return os.waitstatus_to_exitcode(status) == 0
        assert self.proc is not None
        return self.proc.wait() == 0

    def take(self, spec: JobSpec) -> tuple[References | None, list[str]] | None:
        """(references, the lines about them) when the child made them for ``spec``;
        None when it failed or read another job (the caller computes them)."""
        from farm import spec as specmod

        with self._out:
            out = self._out.read()
        if not self._wait():
            return None
        try:
            text, refs, lines = pickle.loads(out)
        except Exception:  # noqa: BLE001 - a child cut short: compute them here
            return None
        if text != specmod.canonical_text(spec):
            return None
        return refs, lines

    def cancel(self) -> None:
        """End the child unread (idempotent; nothing to do once taken)."""
        if self._out.closed:
            return
        if self.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        elif self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        self._out.close()
        self._wait()


def begin(job: str | os.PathLike[str]) -> EarlyReferences | None:
    """Start computing ``job``'s references beside the command's start, or None where
    that does not pay (see the module's docstring)."""
    wanted = os.environ.get(ENV, "").strip()
    if launched_by_mpi() or wanted == "0" or (wanted != "1" and usable_cores() < MIN_CORES):
        return None
    try:
        return EarlyReferences(job)
    except OSError:
        return None


def _computed(job: str) -> bytes:
    """The job file's canonical text, references and the lines about them, pickled."""
    from farm import spec as specmod
    from farm.plan import make_plan

    spec = specmod.load(job)
    lines: list[str] = []
    refs = make_plan(spec).references(lines.append)
    return pickle.dumps((specmod.canonical_text(spec), refs, lines))


if __name__ == "__main__":  # the child where the command cannot fork
    sys.stdout.buffer.write(_computed(sys.argv[1]))
