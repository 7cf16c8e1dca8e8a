"""The device the agent runs on (`agent.device`), and the process-wide CUDA settings that the
learner and a policy alone both need."""

from __future__ import annotations

import re

import torch

_ALLOWED_DEVICES = "'auto', 'cpu', 'cuda' or 'cuda:N'"


def resolve_device(name: str) -> torch.device:
    """Map the `agent.device` setting to a torch.device: 'auto' is cuda when available, else
    cpu; a CUDA device always gets its index ('cuda' is the current one), since torch's
    `cuda:0 == cuda` is False and tensors report the index. Raises a one-line ValueError for
    unknown names and for CUDA without a usable GPU."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cpu":
        return torch.device("cpu")
    match = re.fullmatch(r"cuda(?::(\d+))?", name)
    if match is None:
        raise ValueError(f"agent.device={name!r} is not one of {_ALLOWED_DEVICES}")
    available = torch.cuda.device_count() if torch.cuda.is_available() else 0
    index = int(match.group(1) or 0)
    if index >= available:
        raise ValueError(
            f"agent.device={name!r} but {available} CUDA device(s) are available; "
            f"use one of {_ALLOWED_DEVICES}"
        )
    return torch.device("cuda", index if match.group(1) else torch.cuda.current_device())


def check_pipelined(pipelined: bool, device: torch.device) -> None:
    """`agent.pipelined` needs CUDA: on a CPU acting and the update compete for the same
    cores, and pipelining only costs."""
    if pipelined and device.type != "cuda":
        raise ValueError("agent.pipelined=true needs agent.device=cuda")


def use_device(device: torch.device) -> None:
    """Prepare this process to compute on `device` (nothing to do for the CPU). On CUDA,
    `device` becomes the current device: streams, events and graph capture without a device
    argument use it (cuda:N, N > 0, would otherwise synchronize with cuda:0). cuDNN's TF32
    convolutions go off: the paper's arithmetic is float32, TF32 rounds inputs to 10-bit
    mantissas. cuDNN picks its fastest kernels for the fixed shapes by timing
    (`cudnn.benchmark`), so two processes may pick different ones and differ by rounding."""
    if device.type != "cuda":
        return
    torch.cuda.set_device(device)
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
