"""The machine a recorded run ran on, for the records under book/results/.

A figure that the book quotes from a script's run (how far two kernel paths
drift apart, what a seed changes, what float64 costs) is true of one machine
and one PyTorch: :func:`describe` says which, and the record carries it.
"""

from __future__ import annotations

import datetime
import os
import platform
from pathlib import Path


def cpu_model() -> str:
    """The processor's name as the operating system reports it (``/proc/cpuinfo`` on Linux)."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.lower().startswith(("model name", "hardware", "processor\t: arm")):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def cpu_flags() -> list[str]:
    """The vector instruction sets the processor offers that PyTorch's kernels can use (x86 Linux only)."""
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.is_file():
        return []
    for line in cpuinfo.read_text(errors="replace").splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            return sorted(f for f in flags if f.startswith(("avx", "fma", "sse4")))
    return []


def describe() -> dict:
    """The processor, its cores, the operating system, Python, PyTorch and today's date."""
    import torch

    return {
        "cpu": cpu_model(),
        "architecture": platform.machine(),
        "vector instruction sets": cpu_flags(),
        "cores": os.cpu_count(),
        "system": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch's own kernels here": torch.backends.cpu.get_cpu_capability(),
        "date": datetime.date.today().isoformat(),
    }
