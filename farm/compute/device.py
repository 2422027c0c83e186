"""OpenCL device choice: a GPU when there is one, else any device (PoCL's CPU).

Selectors (``--device`` or the ``FARM_DEVICE`` environment variable):

``auto``   GPUs if any platform has one, else every other device (the default)
``gpu``    GPUs only; an error when there is none
``cpu``    CPU devices only (PoCL)
``P:D``    platform P, device D, as numbered by ``farm devices``

Under MPI, worker ``k`` of a node takes candidate device ``k`` (see
:func:`bind_device`). GPUs are always chosen by device type, never by "platform 0":
machines often list PoCL next to a GPU driver.
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
from dataclasses import dataclass

import pyopencl as cl

from farm.errors import DeviceError, UsageError

# Vendor OpenCL libraries that an ICD file must name for the loader to see them.
_DRIVER_LIBS = {
    "NVIDIA": ["libnvidia-opencl.so.1"],
    "AMD": ["libamdocl64.so"],
    "Intel": ["libigdrcl.so"],
}
_LIB_DIRS = ["/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/nvidia/lib64",
             "/usr/local/nvidia/lib", "/opt/rocm/lib"]


@dataclass(frozen=True)
class DeviceInfo:
    platform_index: int
    device_index: int
    platform: str
    name: str
    kind: str  # GPU | CPU | ACCELERATOR | ...
    compute_units: int
    global_mem: int
    fp64: bool
    int64_atomics: bool

    @property
    def ref(self) -> str:
        return f"{self.platform_index}:{self.device_index}"

    def describe(self) -> str:
        missing = [n for n, ok in (("fp64", self.fp64), ("int64 atomics", self.int64_atomics))
                   if not ok]
        extra = f"  (lacks {', '.join(missing)})" if missing else ""
        return (f"[{self.ref}] {self.kind:<4} {self.name}  ({self.platform}; "
                f"{self.compute_units} units, {self.global_mem / 2**30:.1f} GiB){extra}")


def _kind(dev: cl.Device) -> str:
    t = dev.type
    for name in ("GPU", "CPU", "ACCELERATOR"):
        if t & getattr(cl.device_type, name):
            return name
    return "OTHER"


def list_devices() -> list[tuple[DeviceInfo, cl.Device]]:
    """Every device of every platform; an empty list when no platform is registered."""
    try:
        platforms = cl.get_platforms()
    except cl.Error:  # the ICD loader found no platform at all
        return []
    out = []
    for p_idx, plat in enumerate(platforms):
        try:
            devices = plat.get_devices()
        except cl.Error:
            continue
        for d_idx, dev in enumerate(devices):
            ext = dev.extensions.split()
            info = DeviceInfo(p_idx, d_idx, plat.name.strip(), dev.name.strip(), _kind(dev),
                              dev.max_compute_units, dev.global_mem_size,
                              "cl_khr_fp64" in ext, "cl_khr_int64_base_atomics" in ext)
            out.append((info, dev))
    return out


_PROBE = "__kernel void probe(__global double *a) { a[get_global_id(0)] *= 2.0; }"


@functools.cache
def build_problem(info: DeviceInfo) -> str | None:
    """Why ``info``'s device cannot compile kernels (one line), or None when it can.

    Found by building a tiny program: PoCL 3.0 from pip (LLVM 14) fails this way on
    processors LLVM 14 does not know (AMD Zen 4 and 5, for example), and such a
    device must not be chosen over one that works. Costs one small build a device
    per process (PoCL caches the binary). GPUs are not probed: their vendors'
    compilers know their own chips, and a context on a GPU costs start-up time."""
    if info.kind == "GPU":
        return None
    dev = next(d for i, d in list_devices() if i == info)
    try:
        cl.Program(cl.Context([dev]), _PROBE).build()
    except cl.Error as err:
        lines = [ln.strip() for ln in str(err).splitlines() if "error" in ln.lower()]
        return lines[-1] if lines else str(err).splitlines()[0]
    return None


def _usable(devs: list[tuple[DeviceInfo, cl.Device]]) -> list[tuple[DeviceInfo, cl.Device]]:
    """The devices that compile kernels, with one CPU device at most; a DeviceError
    naming each failure if none compiles.

    Every CPU platform (Debian's PoCL, pip's PoCL, a vendor's runtime) drives the same
    processor, so a second CPU device adds no cores, only another compiler: pip's PoCL
    3.0 on an AMD Zen 4 passes the probe but builds the lanes kernel (double8 code) into
    a program without kernels, and aborts its process at exit once it has. So the
    first CPU device that compiles is kept and later ones are not even probed."""
    good: list[tuple[DeviceInfo, cl.Device]] = []
    for d in devs:
        if d[0].kind == "CPU" and any(g[0].kind == "CPU" for g in good):
            continue
        if build_problem(d[0]) is None:
            good.append(d)
    if devs and not good:
        reasons = "; ".join(f"{i.ref} {i.name}: {build_problem(i)}" for i, _ in devs)
        raise DeviceError(f"no OpenCL device can compile kernels ({reasons}); "
                          + compiler_hint())
    return good


def compiler_hint() -> str:
    return ("PoCL 3.0 from pip is built with LLVM 14, which does not know newer CPUs; install "
            "your distribution's PoCL instead (Debian/Ubuntu: `apt-get install pocl-opencl-icd`)")


def candidates(selector: str = "auto") -> list[tuple[DeviceInfo, cl.Device]]:
    """Devices a render may use, in binding order (devices that cannot compile kernels
    are left out)."""
    devs = list_devices()
    if not devs:
        raise DeviceError("no OpenCL platform found; " + missing_driver_hint())
    return _usable(_select(devs, selector))


def _select(devs: list[tuple[DeviceInfo, cl.Device]],
            selector: str) -> list[tuple[DeviceInfo, cl.Device]]:
    if selector in ("auto", "gpu", "cpu"):
        gpus = [d for d in devs if d[0].kind == "GPU"]
        if selector == "gpu" or (selector == "auto" and gpus):
            if not gpus:
                raise DeviceError("no OpenCL GPU found; " + missing_driver_hint())
            return gpus
        if selector == "cpu":
            cpus = [d for d in devs if d[0].kind == "CPU"]
            if not cpus:
                raise DeviceError("no OpenCL CPU device found (install pyopencl[pocl])")
            return cpus
        return devs
    try:
        p_idx, d_idx = (int(x) for x in selector.split(":"))
    except ValueError:
        raise UsageError(f"--device: {selector!r} is not auto, gpu, cpu or P:D") from None
    chosen = [d for d in devs if (d[0].platform_index, d[0].device_index) == (p_idx, d_idx)]
    if not chosen:
        raise UsageError(f"--device: no device {selector}; `farm devices` lists them")
    return chosen


def bind_device(selector: str = "auto", local_index: int = 0,
                share: bool = False) -> tuple[DeviceInfo, cl.Device]:
    """The device for worker ``local_index`` of its node.

    More workers than candidate devices is an error unless ``share`` (several
    workers per device, as on a CPU); then workers wrap around the devices.
    """
    devs = candidates(selector)
    if local_index >= len(devs) and not share:
        raise UsageError(
            f"worker {local_index} of this node has no device of its own: {len(devs)} "
            f"candidate device(s) ({devs[0][0].kind}); start at most {len(devs)} worker(s) per "
            "node, or allow sharing with --share-devices")
    info, dev = devs[local_index % len(devs)]
    if not info.fp64:
        raise DeviceError(f"{info.name} lacks cl_khr_fp64, which every kernel needs")
    return info, dev


def bind_local(selector: str = "auto", workers: int | None = None) -> list[tuple[DeviceInfo, cl.Device]]:
    """The devices one process renders on, one worker thread each: every GPU the
    selector gives (a workstation's GPUs all work on the job), or its first device
    otherwise (a CPU device already spreads a kernel over all cores). ``workers``
    asks for that many threads instead, taking the devices in turn."""
    devs = candidates(selector)
    chosen = [d for d in devs if d[0].kind == "GPU"] or devs[:1]
    if workers is not None:
        chosen = [chosen[k % len(chosen)] for k in range(workers)]
    for info, _ in chosen:
        if not info.fp64:
            raise DeviceError(f"{info.name} lacks cl_khr_fp64, which every kernel needs")
    return chosen


def selector_from_env(option: str | None) -> str:
    return option or os.environ.get("FARM_DEVICE", "auto")


def _registered_libraries() -> list[str]:
    vendor_dirs = os.environ.get("OCL_ICD_VENDORS", "/etc/OpenCL/vendors")
    libs = []
    for icd in glob.glob(os.path.join(vendor_dirs, "*.icd")):
        try:
            with open(icd) as fh:
                libs.append(fh.read().strip())
        except OSError:
            pass
    return libs


def missing_driver_hint() -> str:
    """What to do when a GPU driver is installed but the OpenCL loader cannot see it."""
    registered = " ".join(_registered_libraries())
    for vendor, names in _DRIVER_LIBS.items():
        for name in names:
            for d in _LIB_DIRS:
                path = os.path.join(d, name)
                if os.path.exists(path) and name not in registered:
                    return (f"{vendor}'s OpenCL driver {path} is installed but not registered "
                            f"with the OpenCL loader (no ICD file names it). Register it: "
                            f"`echo {path} > /etc/OpenCL/vendors/{vendor.lower()}.icd` (as root), "
                            "or point OCL_ICD_VENDORS at a folder holding such a file")
    if shutil.which("nvidia-smi"):
        return ("nvidia-smi is present but no NVIDIA OpenCL library was found; install the "
                "driver's OpenCL part (libnvidia-opencl) and register it in /etc/OpenCL/vendors")
    return "for a CPU device install pyopencl[pocl]; for a GPU install its vendor's OpenCL driver"
