"""What `replay.priority_signal=parameter_change` costs: µs per Double DQN update without and
with the per-transition parameter-change norms (agents/per_sample.py) that the learner then
computes on every update.

    python benchmarks/parameter_change.py                  # CPU, batch 32, Nature network
    python benchmarks/parameter_change.py --device cuda

Two agents with the same initial weights learn from the same random Atari-sized batches, in
turns, update by update, so that a busy machine slows both alike; medians over `--updates`
after a warm-up. Torch uses OMP_NUM_THREADS threads (1 if unset, the training runs' setting
on this project's CPU). Prints figures; asserts nothing.
"""

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents.double_dqn import DoubleDQN  # noqa: E402
from agents.settings import AgentSettings  # noqa: E402


class RandomBatch:
    """The replay's batch layout (agents.double_dqn.Batch) with random contents."""

    def __init__(self, batch_size: int, num_actions: int, rng: np.random.Generator):
        self.all_states = rng.integers(0, 256, (2 * batch_size, 4, 84, 84), dtype=np.uint8)
        self.actions = rng.integers(0, num_actions, batch_size)
        self.rewards = rng.choice([-1.0, 0.0, 1.0], batch_size).astype(np.float32)
        self.terminals = (rng.random(batch_size) < 0.05).astype(np.float32)
        self.weights = rng.uniform(0.3, 1.0, batch_size).astype(np.float32)


def timed_us(function) -> float:
    start = time.perf_counter()
    function()
    return (time.perf_counter() - start) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    rng = np.random.default_rng(0)
    agents = {
        with_norms: DoubleDQN(
            6,
            AgentSettings(device=args.device, learning_rate=0.0000625),
            rng=np.random.default_rng(1),
            batch_size=args.batch_size,
            compute_parameter_change_norms=with_norms,
            frame_shape=(84, 84),
        )
        for with_norms in (False, True)
    }
    batches = [RandomBatch(args.batch_size, 6, rng) for _ in range(4)]
    times = {False: [], True: []}
    for update in range(-len(batches), args.updates):  # the first round warms up
        batch = batches[update % len(batches)]
        for with_norms, agent in agents.items():
            times[with_norms].append(timed_us(lambda a=agent, b=batch: a.learn(b)))
    plain, with_norms = (float(np.median(times[key][len(batches) :])) for key in (False, True))
    print(
        f"device {agents[False].device}, batch {args.batch_size}, {torch.get_num_threads()} "
        f"torch thread(s), load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; "
        f"medians of {args.updates} updates"
    )
    print(f"agent.learn:                   {plain:>12,.0f} µs per update")
    print(f"agent.learn with the norms:    {with_norms:>12,.0f} µs per update")
    extra = with_norms - plain
    print(f"the norms' cost:               {extra:>12,.0f} µs (+{extra / plain:.0%})")


if __name__ == "__main__":
    main()
