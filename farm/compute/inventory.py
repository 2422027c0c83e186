"""The OpenCL devices this machine has: :class:`DeviceInfo` records and
:func:`list_devices`, every device of every platform as the ICD loader lists them.

What may render and which device a worker takes is farm/compute/device.py's business;
the kernel check (farm/compute/kernelcheck.py) and the launch configuration
(farm/compute/launch.py) read these records too, which is why they live below all
three.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyopencl as cl

from farm.compute import clstart


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
    platform_version: str = ""  # what the kernel check's verdict is remembered by
    device_version: str = ""
    driver: str = ""

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
    clstart.wait_platforms()  # a discovery begun beside the imports: the loader starts once
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
                              "cl_khr_fp64" in ext, "cl_khr_int64_base_atomics" in ext,
                              plat.version.strip(), dev.version.strip(), dev.driver_version.strip())
            out.append((info, dev))
    return out
