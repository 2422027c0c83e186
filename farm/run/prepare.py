"""The store a render writes into, before its first tile: a new store made (its plan, the
references of its perturbed frames, the escape pre-pass of ``max = "auto"``), or an existing one
checked to be the same job and resumed; its size against the file system."""


from __future__ import annotations

import contextlib
import errno
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from farm import spec as specmod
from farm.errors import StoreError
from farm.plan import Plan, make_plan, structure
from farm.plan.auto_limits import with_period_limits
from farm.plan.reference_text import describe as describe_references
from farm.plan.reference_types import References
from farm.runtime.timeline import MasterTiming
from farm.store import layout, space
from farm.store.codec import Codec
from farm.store.reader import Store

if TYPE_CHECKING:
    from farm.run.early_refs import EarlyReferences


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
    made beside the start: :func:`prepass_device`) does it (farm/compute/prepass.py; the
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
                layout.remove_stale(path)  # what killed creations or compactions left
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


def prepass_device(bound: list) -> Any:
    """The device a render's escape pre-pass runs on: its first GPU, else its first
    device (PoCL's CPU device: 5-10x numpy's speed on two cores for most jobs; a CPU
    device's compiler is checked on kernels/prepass.cl before it is chosen,
    farm/compute/kernelcheck.py)."""
    for info, device in bound:
        if info.kind == "GPU":
            return device
    return bound[0][1] if bound else None
