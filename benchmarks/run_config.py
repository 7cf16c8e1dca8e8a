"""The run's config as train.py composes it, for the benchmarks that run its parts."""

import os
import sys

import torch
from common import ROOT
from hydra import compose, initialize_config_dir
from hydra.errors import HydraException

import train  # noqa: F401 - its import registers the configs' schemas and resolvers
from agents.policy import resolve_device
from launch.run_guard import keep_freed_memory, torch_threads
from launch.validation import validate_config

# The learning phase as most of a 50M-step run sees it: learning has started and ε is at its
# final 0.01 (the paper's decay spends only the first 1M steps above it).
BENCHMARK_OVERRIDES = ("train.learning_start_steps=1000", "train.epsilon_decay_steps=0")
CPU_CAPACITY = 100_000  # the paper's 1M transitions are 7 GB: too much for a quick CPU look


def configure(user: list[str], check) -> tuple:
    """The run's config as train.py sees it, the benchmark's defaults for the keys the command
    line leaves alone, and every override applied; an error in it or from `check(cfg)` exits
    with one line, status 2. Then torch's threads and malloc are set as train.py sets them."""
    given = {override.split("=", 1)[0].lstrip("+~") for override in user}
    overrides = [o for o in BENCHMARK_OVERRIDES if o.split("=", 1)[0] not in given] + user
    try:
        with initialize_config_dir(str(ROOT / "configs"), version_base="1.3"):
            cfg = compose("config", overrides=overrides)
        if resolve_device(cfg.agent.device).type == "cpu" and "replay.capacity" not in given:
            cfg.replay.capacity = CPU_CAPACITY
            overrides.append(f"replay.capacity={CPU_CAPACITY}")
        cfg = validate_config(cfg)
        check(cfg)
    except (ValueError, HydraException) as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    torch.set_num_threads(torch_threads(cfg.threads))
    keep_freed_memory()
    return cfg, overrides


def device_description(cfg) -> str:
    device = resolve_device(cfg.agent.device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "no GPU"
    return f"{device} ({name}, {os.cpu_count()} CPU cores)"
