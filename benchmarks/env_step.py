"""µs per agent step: envs.lean_atari.make_lean_env vs envs.atari.make_env, same game and seed.

    OMP_NUM_THREADS=1 python benchmarks/env_step.py                  # Pong, 5 rounds of 2000
    python benchmarks/env_step.py --game breakout --steps 1000 --rounds 9

One pre-drawn sequence of random actions, frame_skip 4; the rounds alternate the envs, so that
a change of load hits both. The floor: a bare ALEInterface, 4 `act` calls a step, no screen
read; then what the lean env's processing costs above it.
"""

import os
import statistics
import time

import cv2
import numpy as np
from common import command_line, timed

from envs.atari import make_env
from envs.lean_atari import make_lean_env


def timed_steps(env, actions) -> float:
    """µs per `step` over `actions`, resets excluded."""
    spent = []
    step = timed(env.step, spent.append)
    for action in actions:
        _, _, terminated, truncated, _ = step(action)
        if terminated or truncated:
            env.reset()
    return sum(spent) / len(actions) * 1e6


def timed_emulator(ale, ale_actions) -> float:
    """µs per step of the emulator alone: the floor under both envs."""
    start = time.perf_counter()
    for action in ale_actions:
        for _ in range(4):
            ale.act(action)
        if ale.game_over():
            ale.reset_game()
    return (time.perf_counter() - start) / len(ale_actions) * 1e6


def processing_costs(env, steps: int) -> dict[str, float]:
    """µs per step of each operation of the lean env's observation, on its own buffers."""
    screens, grey, size = env._screens, env._grey, env._size
    operations = {
        "2 RGB screen reads": lambda: [env.ale.getScreenRGB(screen) for screen in screens],
        "maximum of the two": lambda: np.maximum(screens[0], screens[1], out=screens[0]),
        "luminance": lambda: cv2.cvtColor(screens[0], cv2.COLOR_RGB2GRAY, dst=grey),
        "area resize to 84x84": lambda: cv2.resize(grey, size, interpolation=cv2.INTER_AREA),
    }
    costs = {}
    for name, operation in operations.items():
        start = time.perf_counter()
        for _ in range(steps):
            operation()
        costs[name] = (time.perf_counter() - start) / steps * 1e6
    return costs


def main() -> None:
    parser = command_line(__doc__)
    parser.add_argument("--game", default="pong")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}")
    envs = {"make_env": make_env(args.game, args.seed), "lean": make_lean_env(args.game, args.seed)}
    for env in envs.values():
        env.reset()
    lean = envs["lean"]
    actions = np.random.default_rng(args.seed).integers(lean.action_space.n, size=args.steps)
    action_set = lean.ale.getMinimalActionSet()
    results = {name: [] for name in (*envs, "emulator only")}
    for _ in range(args.rounds):
        for name, env in envs.items():
            results[name].append(timed_steps(env, actions.tolist()))
        results["emulator only"].append(timed_emulator(lean.ale, [action_set[a] for a in actions]))
    print(f"{args.game}, {args.rounds} rounds x {args.steps} steps, µs per step (4 frames)")
    for name, values in results.items():
        print(
            f"  {name:14s} median {statistics.median(values):7.1f}  "
            f"min {min(values):7.1f}  max {max(values):7.1f}"
        )
    ratios = [lean / gym for lean, gym in zip(results["lean"], results["make_env"], strict=True)]
    print(
        f"  lean / make_env per round: median {statistics.median(ratios):.3f} "
        f"({', '.join(f'{r:.3f}' for r in ratios)})"
    )
    print("the lean env's processing, µs per step:")
    for name, cost in processing_costs(lean, args.steps).items():
        print(f"  {name:22s} {cost:7.1f}")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
