"""What GPU device nodes this machine has: checks made without loading OpenCL (its
start-up costs 0.2-0.9 s), so that colouring, frame synthesis and the codec choice
ask OpenCL or NVENC for a GPU only where one can exist."""

from __future__ import annotations

import glob
import os

NVIDIA_NODE = "/dev/nvidiactl"


def nvidia_present() -> bool:
    """An NVIDIA driver is loaded on this machine."""
    return os.path.exists(NVIDIA_NODE)


def gpu_possible() -> bool:
    """A GPU device node exists (NVIDIA, AMD's KFD, a DRM render node)."""
    return nvidia_present() or os.path.exists("/dev/kfd") or bool(glob.glob("/dev/dri/renderD*"))
