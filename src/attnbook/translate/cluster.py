"""Where the work runs: the device, and this process's place among ``torchrun``'s processes.

Run alone, a command is rank 0 of 1 and every collective operation below is a
no-op. Under ``torchrun --nproc_per_node=N`` each process reads its rank from
the environment, takes its own GPU (or shares the CPU), and joins the process
group: gloo on CPUs, NCCL on GPUs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from ..attention import attention_kernels_for
from ..checks import resolve_device
from .console import CommandError

__all__ = ["pick_device", "Cluster"]


def pick_device(name: str) -> torch.device:
    """The device ``--device name`` means: ``auto`` is a CUDA GPU when PyTorch sees one, else the CPU.

    On a GPU the attention kernels are chosen for batches of changing shapes
    (:func:`attnbook.attention.attention_kernels_for`: cuDNN's plan a kernel for every shape).
    """
    try:
        device = resolve_device(name, prefer=("cuda",))
    except ValueError:
        raise CommandError(f"--device {name!r}: use auto, cpu, cuda or cuda:N") from None
    except RuntimeError as err:
        raise CommandError(f"--device {name}: {err} (use --device cpu)") from None
    attention_kernels_for(device)
    return device


@dataclass
class Cluster:
    """This process's place in a ``torchrun`` job (rank 0 of 1 when run alone)."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0
    device: Any = None

    @property
    def distributed(self) -> bool:
        return self.world > 1

    @property
    def is_first(self) -> bool:
        """The process that prints and writes the run folder."""
        return self.rank == 0

    @classmethod
    def start(cls, device: str) -> Cluster:
        """Join the job that ``torchrun`` started (if any) on the device ``--device`` names."""
        world = int(os.environ.get("WORLD_SIZE", "1"))
        rank, local_rank = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
        dev = pick_device(device)
        if dev.type == "cuda":
            if world > 1 or dev.index is None:  # under torchrun, each process its own GPU
                dev = torch.device("cuda", local_rank)
            torch.cuda.set_device(dev)
        if world > 1 and not dist.is_initialized():
            dist.init_process_group(backend="nccl" if dev.type == "cuda" else "gloo")
        return cls(rank, world, local_rank, dev)

    def all_sum(self, values: list[float]) -> list[float]:
        """The element-wise sum over every process (a no-op alone)."""
        if not self.distributed:
            return values
        t = torch.tensor(values, dtype=torch.float64, device=self.device if self.device.type == "cuda" else "cpu")
        dist.all_reduce(t)
        return t.tolist()

    def gather(self, obj: Any) -> list[Any]:
        """Every process's ``obj``, in rank order."""
        if not self.distributed:
            return [obj]
        out: list[Any] = [None] * self.world
        dist.all_gather_object(out, obj)
        return out

    def barrier(self) -> None:
        if self.distributed:
            dist.barrier()

    def stop(self) -> None:
        if self.distributed and dist.is_initialized():
            dist.destroy_process_group()
