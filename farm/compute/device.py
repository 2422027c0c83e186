"""OpenCL device choice: a GPU when there is one, else any device (PoCL's CPU).

Selectors (``--device`` or the ``FARM_DEVICE`` environment variable):

``auto``   GPUs if any platform has one, else every other device (the default)
``gpu``    GPUs only; an error when there is none
``cpu``    CPU devices only (PoCL)
``P:D``    platform P, device D, as numbered by ``farm devices``

Under MPI, worker ``k`` of a node takes candidate device ``k`` (see
:func:`bind_device`). GPUs are always chosen by device type, never by "platform 0":
machines often list PoCL next to a GPU driver.

A CPU device is a candidate only once a child process has built and run every kernel
on it (farm/compute/kernelcheck.py: a compiler that crashes takes the child, not the
render; the verdict is remembered per driver and device), so a render falls back to
the next device, or says in one line what to install.

The devices themselves, as :class:`~farm.compute.inventory.DeviceInfo` records, are
listed by farm/compute/inventory.py.
"""

from __future__ import annotations

import functools
import glob
import os
import re
import shutil

import pyopencl as cl

from farm.compute import kernelcheck
from farm.compute.inventory import DeviceInfo, list_devices
from farm.errors import DeviceError, UsageError

# Vendor OpenCL libraries that an ICD file must name for the loader to see them.
_DRIVER_LIBS = {
    "NVIDIA": ["libnvidia-opencl.so.1"],
    "AMD": ["libamdocl64.so"],
    "Intel": ["libigdrcl.so"],
}
_LIB_DIRS = ["/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/nvidia/lib64",
             "/usr/local/nvidia/lib", "/opt/rocm/lib"]


@functools.cache
def build_problem(info: DeviceInfo) -> str | None:
    """Why ``info``'s device cannot render (one line), or None when it can: for a CPU
    device, the verdict of farm/compute/kernelcheck.py (a child process built and ran
    every kernel, remembered per driver and device). GPUs are not checked: their
    vendors' compilers know their own chips and report failures as errors, and a
    context on a GPU costs start-up time."""
    if info.kind == "GPU":
        return None
    return kernelcheck.problem(info)


def known_problem(info: DeviceInfo) -> str | None:
    """:func:`build_problem` as far as it is known without checking (``farm devices``
    shows it for devices that are not candidates)."""
    if info.kind == "GPU":
        return None
    return kernelcheck.cached(info)[1]


def _usable(devs: list[tuple[DeviceInfo, cl.Device]]) -> list[tuple[DeviceInfo, cl.Device]]:
    """The devices that compile kernels, with one CPU device at most; a DeviceError
    naming each failure if none compiles.

    Every CPU platform (Debian's PoCL, pip's PoCL, a vendor's runtime) drives the same
    processor, so a second CPU device adds no cores, only another compiler (and another
    check): the first CPU device that passes is kept and later ones are not checked."""
    good: list[tuple[DeviceInfo, cl.Device]] = []
    for d in devs:
        if d[0].kind == "CPU" and any(g[0].kind == "CPU" for g in good):
            continue
        if build_problem(d[0]) is None:
            good.append(d)
    if devs and not good:
        reasons = "; ".join(f"[{i.ref}] {i.name}: {build_problem(i)}" for i, _ in devs)
        raise DeviceError(f"no OpenCL device can render ({reasons}); "
                          + compiler_hint([i for i, _ in devs], [i for i, _ in list_devices()]))
    return good


def _pocl_version(platform_version: str) -> str:
    """"PoCL 3.0-rc2 (LLVM 14.0.6)" from a PoCL platform's version string."""
    pocl = re.search(r"PoCL (\S+)", platform_version)
    llvm = re.search(r"LLVM (\S+)", platform_version)
    text = f"PoCL {pocl.group(1)}" if pocl else platform_version
    return text + (f" (LLVM {llvm.group(1)})" if llvm else "")


def compiler_hint(broken: list[DeviceInfo], devices: list[DeviceInfo] | None = None) -> str:
    """What to do when the devices ``broken`` cannot render (their compilers fail on
    the kernels), on a machine with ``devices``: another device where there is one; the
    distribution's PoCL where it is not registered; else a newer PoCL or a GPU."""
    others = [i for i in devices or [] if i not in broken]
    if others:
        return (f"choose another device (here also {', '.join(f'[{i.ref}] {i.name}' for i in others)}; "
                "--device auto takes one that works)")
    pocl = [lib for lib in _registered_libraries() if "pocl" in lib.lower()]
    if not pocl:
        return ("install your distribution's PoCL (Debian/Ubuntu: `apt-get install "
                "pocl-opencl-icd`; Fedora: `dnf install pocl`): PoCL 3.0 from pip is built "
                "with LLVM 14, which does not know newer processors")
    versions = sorted({_pocl_version(i.platform_version) for i in broken if "PoCL" in i.platform_version})
    return (f"every PoCL here fails ({', '.join(versions) or pocl[0]}); install a newer PoCL "
            "(built with an LLVM that knows this processor), or render on a GPU with its "
            "vendor's OpenCL driver")


class Selector(str):
    """A device selector that knows where it came from (``--device`` or the variable
    ``FARM_DEVICE``): its errors name that."""

    origin: str

    def __new__(cls, value: str, origin: str = "--device") -> Selector:
        self = super().__new__(cls, value)
        self.origin = origin
        return self


def _origin(selector: str) -> str:
    return getattr(selector, "origin", "--device")


def check_selector(selector: str) -> None:
    """UsageError (one line, naming ``--device`` or ``FARM_DEVICE``) unless ``selector``
    is auto, gpu, cpu or P:D; whether the device exists is :func:`candidates`' business."""
    if selector not in ("auto", "gpu", "cpu") and not re.fullmatch(r"\d+:\d+", selector):
        raise UsageError(f"{_origin(selector)}: {selector!r} is not auto, gpu, cpu or P:D "
                         "(platform:device, as `farm devices` numbers them)")


def candidates(selector: str = "auto") -> list[tuple[DeviceInfo, cl.Device]]:
    """Devices a render may use, in binding order (devices that cannot render are left
    out)."""
    check_selector(selector)
    devs = list_devices()
    if not devs:
        raise DeviceError("no OpenCL platform found; " + missing_driver_hint())
    return _usable(_select(devs, selector))


def _listing(devs: list[tuple[DeviceInfo, cl.Device]]) -> str:
    """"[0:0] CPU pthread-AMD EPYC, [1:0] GPU NVIDIA H100": what a machine has."""
    return ", ".join(f"[{i.ref}] {i.kind} {i.name}" for i, _ in devs)


def _select(devs: list[tuple[DeviceInfo, cl.Device]],
            selector: str) -> list[tuple[DeviceInfo, cl.Device]]:
    if selector in ("auto", "gpu", "cpu"):
        gpus = [d for d in devs if d[0].kind == "GPU"]
        if selector == "gpu" or (selector == "auto" and gpus):
            if not gpus:
                raise DeviceError(f"no OpenCL GPU found ({_origin(selector)} gpu); "
                                  + missing_driver_hint([i for i, _ in devs]))
            return gpus
        if selector == "cpu":
            cpus = [d for d in devs if d[0].kind == "CPU"]
            if not cpus:
                raise DeviceError(f"no OpenCL CPU device found ({_origin(selector)} cpu; here: "
                                  f"{_listing(devs)}); install PoCL: your distribution's "
                                  "(`apt-get install pocl-opencl-icd`) or `pip install pyopencl[pocl]`")
            return cpus
        return devs
    chosen = [d for d in devs if d[0].ref == selector]
    if not chosen:
        raise UsageError(f"{_origin(selector)}: no device {selector}; the devices here are "
                         f"{_listing(devs)}")
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


def selector_from_env(option: str | None) -> Selector:
    """The selector of ``--device`` (``option``), else of FARM_DEVICE, else auto."""
    if option:
        return Selector(option, "--device")
    if os.environ.get("FARM_DEVICE"):
        return Selector(os.environ["FARM_DEVICE"], "FARM_DEVICE")
    return Selector("auto")


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


def unregistered_driver() -> str | None:
    """What to do when a GPU driver is installed but the OpenCL loader cannot see it
    (one line), or None when no such driver is found."""
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
    return None


def missing_driver_hint(devs: list[DeviceInfo] | None = None) -> str:
    """What to do about a missing GPU on a machine whose OpenCL devices are ``devs``:
    register a GPU driver that is installed (:func:`unregistered_driver`), or install
    one (and PoCL for the CPU, where there is no device at all). Says what is there."""
    found = unregistered_driver()
    if found:
        return found
    if devs:
        return (f"the OpenCL devices here are {', '.join(f'[{i.ref}] {i.kind} {i.name}' for i in devs)}; "
                "for a GPU install its vendor's OpenCL driver")
    return ("for a CPU device install PoCL (your distribution's pocl-opencl-icd, or `pip install "
            "pyopencl[pocl]`); for a GPU, its vendor's OpenCL driver")
