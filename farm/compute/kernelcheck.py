"""Does a device's OpenCL compiler build and run every kernel a render uses? Asked in a
child process, remembered per driver and device.

Some compilers die instead of failing: pip's PoCL 3.0 (LLVM 14) on an AMD Zen 4 aborts
its whole process with ``LLVM ERROR: Cannot select: ... fma`` when it generates code
for the double8 lanes kernel (kernels/perturb_lanes.cl), and PoCL generates code at a
kernel's first launch, not when the program is built. So before a device is chosen,
a child process (``python -m farm.compute.kernelcheck P:D``) renders one 16x16 tile of
each kind of frame a render may have (:data:`CASES`: f64, fp128, quad-single,
perturbation with double deltas (the lanes kernel on CPUs) with and without the
distance estimate and samples, and with floatexp deltas), through the renderer itself,
then the escape pre-pass's steps (kernels/prepass.cl, which a render runs on its device:
farm/compute/prepass.py) on a direct and a perturbed grid. It prints ``case NAME``
before each and ``ok`` at the end; a crash takes the child, not the render, and the
last case names the kernel that killed it.

The verdict (None, or why the device cannot be used, one line) is kept in a JSON
file, ``$FARM_DEVICE_CACHE``, else ``$XDG_CACHE_HOME/zoomfarm/devices.json``, else
``~/.cache/zoomfarm/devices.json``, keyed by the platform and its version, the device,
its version and driver version, the processor (CPU devices), the kernels' sources and
the build knobs (FARM_CL_OPTIONS, FARM_PERTURB_LANES). A check costs seconds (minutes
where the compiler crashes) once per driver, device and farm version; processes that
need a verdict at once (MPI ranks of a node) wait for the one that checks.

Only CPU devices are checked: a GPU vendor's compiler knows its chips, reports a
failure as an error (farm/compute/programs.py), and the check would cost a GPU's
start-up. ``FARM_TEST_KERNEL_CRASH`` (tests: ``*`` or ``P:D,P:D``) makes the child
abort as a crashing compiler would.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from farm.runtime.cache import cache_dir

if TYPE_CHECKING:
    from farm.compute.inventory import DeviceInfo

TIMEOUT_S = 900.0  # a crashing LLVM took 4 minutes on a loaded 2-core machine
CRASH_KNOB = "FARM_TEST_KERNEL_CRASH"
KERNELS = ("mandel.cl", "histogram.cl", "f64.cl", "fp128.cl", "qs.cl", "perturb.cl",
           "perturb_lanes.cl", "prepass.cl")
CENTER = ('"-0.743643887037158704752191506114774"', '"0.131825904205311970493132056385139"')
# name -> (view width, precision, more [image] keys, more [render] keys)
CASES = {
    "f64": ("3", "f64", "", ""),
    "fp128": ("3", "fp128", "", ""),
    "quad-single": ("3", "quad-single", "", ""),
    "perturb": ("1e-20", "perturb", "", ""),
    "perturb with distance and samples": ("1e-20", "perturb", "samples = 4", "distance = true"),
    "perturb-fx": ("1e-320", "perturb", "", ""),
}


def cache_path() -> Path:
    """Where verdicts are kept (see the module's docstring)."""
    if os.environ.get("FARM_DEVICE_CACHE"):
        return Path(os.environ["FARM_DEVICE_CACHE"])
    return cache_dir() / "devices.json"


@functools.cache
def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    return ""


def key(info: DeviceInfo) -> str:
    """The cache key of ``info``'s verdict (see the module's docstring)."""
    from farm.compute.programs import source

    parts = [info.platform, info.platform_version, info.name, info.device_version, info.driver,
             _cpu_model() if info.kind == "CPU" else "",
             hashlib.sha256("".join(source(n) for n in KERNELS).encode()).hexdigest(),
             os.environ.get("FARM_CL_OPTIONS", ""), os.environ.get("FARM_PERTURB_LANES", ""),
             os.environ.get(CRASH_KNOB, "")]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:24]


def _read(path: Path) -> dict[str, Any]:
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return {}


def cached(info: DeviceInfo) -> tuple[bool, str | None]:
    """(known, problem): the remembered verdict on ``info``, without checking."""
    entry = _read(cache_path()).get(key(info))
    if not isinstance(entry, dict) or "problem" not in entry:
        return False, None
    return True, entry["problem"]


def _store(info: DeviceInfo, problem: str | None) -> None:
    """Remember a verdict (atomically; nothing when the cache cannot be written)."""
    path = cache_path()
    entries = _read(path)
    entries[key(info)] = {"problem": problem, "device": f"{info.platform} {info.platform_version}: "
                          f"{info.name} ({info.driver})",
                          "checked": time.strftime("%Y-%m-%d %H:%M:%S")}
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with contextlib.suppress(OSError):
        tmp.write_text(json.dumps(entries, indent=1))
        os.replace(tmp, path)
    with contextlib.suppress(OSError):
        tmp.unlink()


@contextlib.contextmanager
def _locked():
    """The cache's lock (one process checks a device; the others wait for its verdict);
    no lock where the cache's folder cannot be written."""
    path = cache_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        yield
        return
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def problem(info: DeviceInfo) -> str | None:
    """Why ``info``'s device cannot render (one line), or None when every kernel built
    and ran on it: remembered, or found by a child process (then remembered)."""
    known, verdict = cached(info)
    if known:
        return verdict
    with _locked():
        known, verdict = cached(info)  # another process may have checked meanwhile
        if known:
            return verdict
        if sys.stderr.isatty():
            print(f"farm: checking that {info.ref} {info.name} builds and runs the kernels "
                  f"(once per driver; remembered in {cache_path()})", file=sys.stderr)
        verdict, final = run_child(info)
        if final:
            _store(info, verdict)
    return verdict


def run_child(info: DeviceInfo, timeout: float = TIMEOUT_S) -> tuple[str | None, bool]:
    """(problem or None, whether the verdict is final) from a child process that renders
    :data:`CASES` on ``info``'s device."""
    cmd = [sys.executable, "-m", "farm.compute.kernelcheck", info.ref, info.name]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return f"checking its kernels took longer than {timeout:.0f} s", False
    except OSError as err:
        return f"cannot start the kernel check: {err}", False
    out = done.stdout.splitlines()
    if done.returncode == 0 and out[-1:] == ["ok"]:
        return None, True
    case = next((line[5:] for line in reversed(out) if line.startswith("case ")), "?")
    failed = [line for line in out if line.startswith("failed: ")]
    if failed:
        return f"the {case} kernel: {failed[-1][8:]}", True
    if done.returncode < 0:
        name = signal.Signals(-done.returncode).name
        return f"its OpenCL compiler crashed ({name}) on the {case} kernel{_llvm(done.stderr)}", True
    return f"the kernel check ended with status {done.returncode}{_llvm(done.stderr)}", True


def _llvm(stderr: str) -> str:
    """": LLVM ERROR: Cannot select: i64 = fma" (addresses removed), or the last line."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    picked = next((ln for ln in lines if "LLVM ERROR" in ln), lines[-1] if lines else "")
    picked = re.sub(r"\s*0x[0-9a-f]+:?", "", picked).replace(" ,", ",").strip(" ,")
    return f": {picked[:160]}" if picked else ""


# ---------------------------------------------------------------------------- the child


def _case_plan(name: str):
    from farm import spec as specmod
    from farm.plan import make_plan

    width, precision, image, render = CASES[name]
    text = (f'[view]\ncenter = [{CENTER[0]}, {CENTER[1]}]\nwidth = "{width}"\n'
            f"[image]\nsize = [16, 16]\n{image}\n[animation]\nframes = 1\n"
            f"[iterations]\nmax = 300\n"
            f'[render]\nprecision = "{precision}"\ntile = [16, 16]\n{render}\n')
    return make_plan(specmod.parse_text(text, name="kernelcheck"))


def _crash_wanted(ref: str) -> bool:
    wanted = os.environ.get(CRASH_KNOB, "")
    return wanted == "*" or ref in wanted.split(",")


def main(argv: list[str]) -> int:
    """``python -m farm.compute.kernelcheck P:D NAME``: render every case on device P:D
    (which must be named NAME)."""
    import pyopencl as cl

    from farm.compute.inventory import list_devices
    from farm.compute.render import TileRenderer
    from farm.errors import FarmError

    ref, name = argv
    found = [(i, d) for i, d in list_devices() if i.ref == ref and i.name == name]
    if not found:
        print(f"failed: device {ref} {name} is not there")
        return 1
    info, device = found[0]

    def render_case(case: str) -> None:
        plan = _case_plan(case)
        renderer = TileRenderer(device, info, plan, references=plan.references())
        try:
            renderer.render(plan.frames[0], plan.grid.tile(0))
        finally:
            renderer.close()

    checks = [(case, functools.partial(render_case, case)) for case in CASES]
    checks.append(("escape pre-pass", functools.partial(_prepass_case, device)))
    for case, check in checks:
        print(f"case {case}", flush=True)
        if _crash_wanted(ref):
            os.abort()
        try:
            check()
        except (FarmError, cl.Error) as err:
            print("failed: " + " ".join(str(err).split())[:300], flush=True)
            return 1
    print("ok", flush=True)
    return 0


def _prepass_case(device: Any) -> None:
    """The pre-pass's two kernels on ``device``: a direct grid, and a perturbed one
    against a short orbit of the view's centre (rebased where it ends)."""
    import numpy as np
    import pyopencl as cl

    from farm.compute import prepass as device_prepass
    from farm.plan import prepass

    c = (-0.75, 0.1)
    z, orbit = (0.0, 0.0), [(0.0, 0.0)]
    for _ in range(40):
        z = (z[0] * z[0] - z[1] * z[1] + c[0], 2 * z[0] * z[1] + c[1])
        orbit.append(z)
    grids = [prepass.direct_grid(0, c, (8, 8), 3.0),
             prepass.perturbed_grid(1, (0.0, 0.0), np.array(orbit), (8, 8), 1e-3)]
    device_prepass.iterate(cl.CommandQueue(cl.Context([device])), grids, 4.0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
