"""The learner's update alone: eager, compiled (`agent.torch_compile`) and other variants.

    python benchmarks/update_step.py experiment=minatar_dqn threads=1
    python benchmarks/update_step.py experiment=minatar_dqn threads=1 --option cpp_wrapper=false
    python benchmarks/update_step.py threads=1 --norms --rounds 5 --calls 5 --warmup 5

Each variant is the config's learner, built from the run's seed, updating on one batch of
random play. The variants take turns in rounds of `--calls` updates, in alternating order; the
table gives each one's µs per update (median and quartiles over the rounds) and its ratio to
eager's in the same round, the steadier figure on a machine whose load drifts. `--option` adds
a compiled variant with that Inductor option changed.
"""

import argparse
import dataclasses
import functools
import os
import statistics
import time

import numpy as np
import torch
import yaml
from common import command_line, load_averages, markdown, median_us, timed
from run_config import configure, device_description
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode, flop_registry

from agents.compilation import CompiledUpdate
from agents.double_dqn import DoubleDQN
from envs.registry import build_env


def check_args(args: argparse.Namespace) -> None:
    """Quartiles need two rounds, a time per update one call, an option its value."""
    if args.rounds < 2:
        raise ValueError(f"--rounds {args.rounds}: allowed is 2 or more (for the quartiles)")
    if args.calls < 1:
        raise ValueError(f"--calls {args.calls}: allowed is 1 or more")
    for option in args.option:
        if "=" not in option:
            raise ValueError(f"--option {option}: allowed is KEY=VALUE, an Inductor option")


def random_play_batch(cfg, generator: np.random.Generator) -> tuple:
    """A batch of the config's size as `update_step` takes it: 2B states of history_length
    consecutive frames of random play, random actions and rewards, a tenth terminal."""
    batch_size, history = cfg.train.batch_size, cfg.agent.history_length
    env = build_env(cfg.env, seed=int(generator.integers(2**31)))
    frames = [env.reset()[0]]
    while len(frames) < 2 * batch_size + history - 1:
        frame, _, terminated, truncated, _ = env.step(int(generator.integers(env.action_space.n)))
        frames.append(frame)
        if terminated or truncated:
            frames.append(env.reset()[0])
    states = np.stack([np.stack(frames[i : i + history]) for i in range(2 * batch_size)])
    actions = generator.integers(env.action_space.n, size=batch_size)
    rewards = generator.random(batch_size, dtype=np.float32)
    terminals = (generator.random(batch_size) < 0.1).astype(np.float32)
    weights = np.ones(batch_size, np.float32)
    return env.action_space.n, frames[0].shape, (states, actions, rewards, terminals, weights)


def variants(cfg, args, num_actions: int, frame_shape: tuple) -> dict:
    """name -> (its update, its learner)."""
    compiled = {"compiled": None}
    for option in args.option:
        key, value = option.split("=", 1)
        compiled[f"compiled, {option}"] = {key: yaml.safe_load(value)}
    made = {}
    for name in ["eager", *compiled] + ["eager, parameter-change norms"] * args.norms:
        learner = DoubleDQN(
            num_actions,
            dataclasses.replace(cfg.agent, torch_compile=False),
            rng=np.random.default_rng(cfg.seed),
            frame_shape=frame_shape,
            batch_size=cfg.train.batch_size,
            compute_parameter_change_norms=name.endswith("norms"),
        )
        if name in compiled:
            learner.compiled_update = CompiledUpdate(DoubleDQN.update, compiled[name])
        made[name] = (learner.update_step, learner)
    return made


def timed_rounds(made: dict, inputs: tuple, args) -> dict:
    """µs per update of each variant, one figure per round."""
    synchronize = torch.cuda.synchronize if inputs[0].is_cuda else lambda: None
    for step, _ in made.values():
        for _ in range(args.warmup):
            step(*inputs)
    seconds = {name: [] for name in made}
    for round_index in range(args.rounds):
        order = list(made.items())
        for name, (step, _) in order if round_index % 2 else reversed(order):
            synchronize()
            start = time.perf_counter()
            for _ in range(args.calls):
                step(*inputs)
            synchronize()
            seconds[name].append((time.perf_counter() - start) / args.calls * 1e6)
    return seconds


def profiles(made: dict, inputs: tuple, calls: int) -> str:
    """Each variant's operators, by their own CPU time per update."""
    tables = []
    for name, (step, _) in made.items():
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
            for _ in range(calls):
                step(*inputs)
        operators = sorted(profile.key_averages(), key=lambda e: e.self_cpu_time_total)[::-1]
        body = [
            [o.key[:60], f"{o.self_cpu_time_total / calls:,.0f}", f"{o.count / calls:g}"]
            for o in operators[:12]
        ]
        tables.append(f"{name}:\n" + markdown(["operator", "own µs/update", "calls"], body))
    return "\n\n".join(tables)


def acting_table(made: dict, inputs: tuple, state: np.ndarray, args) -> str:
    """µs of a greedy action (median over the rounds' calls) right after an update, a second
    one right after it, and among actions alone, per variant."""
    columns = ("after an update", "a second action", "actions alone")
    times = {name: {column: [] for column in columns} for name in made}
    for _ in range(args.rounds):
        for name, (step, learner) in made.items():
            greedy = functools.partial(learner.policy.act, state, 0.0)
            after, second, alone = (timed(greedy, times[name][column].append) for column in columns)
            for _ in range(args.calls):
                step(*inputs)
                after()
                second()
            for _ in range(args.calls):
                alone()
    body = [
        [name, *(f"{np.median(spent[column]) * 1e6:,.0f}" for column in columns)]
        for name, spent in times.items()
    ]
    return markdown(["variant, µs per action", *columns], body)


class ProductRecorder(TorchDispatchMode):
    """Keeps every operator FlopCounterMode counts (an update's matrix products and
    convolutions) with copies of its operands, to call again."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func._overloadpacket in flop_registry:
            copies = [a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args]
            self.calls.append((func, copies, kwargs))
        return func(*args, **kwargs)


def products_alone(calls: list, rounds: int, repeats: int) -> float:
    """µs of an update's recorded products called back to back with nothing between them
    (the median over `rounds` of `repeats` updates' worth): the least time they take."""

    def updates_worth() -> None:
        for _ in range(repeats):
            for func, args, kwargs in calls:
                func(*args, **kwargs)

    updates_worth()  # warm-up
    return median_us(updates_worth, rounds) / repeats


# A product this large runs at the core's practical peak, whatever the caches hold.
REFERENCE_PRODUCT_SIZE = 1024


def matrix_product_rate(calls: int = 20) -> float:
    """FLOP/s of a REFERENCE_PRODUCT_SIZE² float32 matrix product on this process's threads
    (the median of `calls`)."""
    size = REFERENCE_PRODUCT_SIZE
    left, right, out = torch.randn(size, size), torch.randn(size, size), torch.empty(size, size)
    product = functools.partial(torch.mm, left, right, out=out)
    product()  # warm-up
    return 2 * size**3 / (median_us(product, calls) * 1e-6)


def flops_report(step, inputs: tuple, seconds: dict, args) -> str:
    """One update's products (counted and recorded on one more call of `step`, the eager
    update), their time alone, and each variant's rate of them at its median time."""
    recorder = ProductRecorder()
    with FlopCounterMode(display=False) as counter, recorder:
        step(*inputs)
    flops = counter.get_total_flops()
    alone = products_alone(recorder.calls, args.rounds, args.calls)
    reference = matrix_product_rate()
    body = []
    for name, times in seconds.items():
        median = statistics.median(times)
        rate = flops / (median * 1e-6)
        body.append([name, f"{rate / 1e9:.1f}", f"{rate / reference:.0%}", f"{alone / median:.0%}"])
    head = ["variant", "GFLOP/s", f"of a {REFERENCE_PRODUCT_SIZE}² product's", "its products alone"]
    return (
        f"matrix products and convolutions: {flops / 1e6:.1f} MFLOP per update, {alone:,.0f} µs "
        f"called alone ({flops / alone / 1e3:.1f} GFLOP/s); a {REFERENCE_PRODUCT_SIZE}² float32 "
        f"product: {reference / 1e9:.1f} GFLOP/s\n\n" + markdown(head, body)
    )


def table(seconds: dict) -> str:
    body = []
    for name, times in seconds.items():
        ratios = [t / e for t, e in zip(times, seconds["eager"], strict=True)]
        low, median, high = statistics.quantiles(times, n=4)
        ratio_low, ratio, ratio_high = statistics.quantiles(ratios, n=4)
        cells = [name, f"{median:,.0f}", f"{low:,.0f}–{high:,.0f}", f"{ratio:.3f}"]
        body.append([*cells, f"{ratio_low:.3f}–{ratio_high:.3f}"])
    head = ["variant", "µs/update", "quartiles", "÷ eager (paired)", "quartiles"]
    return markdown(head, body)


def main() -> None:
    parser = command_line(__doc__, overrides="Hydra overrides, as for train.py")
    parser.add_argument("--rounds", type=int, default=40, help="rounds of each variant")
    parser.add_argument("--calls", type=int, default=50, help="updates per round")
    parser.add_argument("--warmup", type=int, default=50, help="untimed updates per variant")
    parser.add_argument("--profile", action="store_true", help="torch.profiler's operators")
    parser.add_argument("--acting", action="store_true", help="greedy actions after an update")
    parser.add_argument("--flops", action="store_true", help="the update's rate of arithmetic")
    parser.add_argument("--norms", action="store_true", help="eager with parameter-change norms")
    parser.add_argument(
        "--option", action="append", default=[], metavar="KEY=VALUE", help="an Inductor option"
    )
    args = parser.parse_intermixed_args()
    cfg, _ = configure(args.overrides, lambda cfg: check_args(args))
    loads = [os.getloadavg()]
    num_actions, frame_shape, arrays = random_play_batch(cfg, np.random.default_rng(cfg.seed))
    made = variants(cfg, args, num_actions, frame_shape)
    inputs = tuple(torch.from_numpy(array).to(made["eager"][1].device) for array in arrays)
    seconds = timed_rounds(made, inputs, args)
    loads.append(os.getloadavg())
    print(
        f"device {device_description(cfg)}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} thread(s); load average {load_averages(loads)}\n"
        f"overrides: {' '.join(args.overrides)}\n"
        f"{args.rounds} rounds of {args.calls} updates per variant after {args.warmup}; "
        f"{cfg.env.kind} {cfg.env.game}, network {cfg.agent.network}, batch "
        f"{cfg.train.batch_size}\n\n{table(seconds)}"
    )
    if args.profile:
        print("\n" + profiles(made, inputs, args.calls))
    if args.acting:
        print("\n" + acting_table(made, inputs, arrays[0][0], args))
    if args.flops:
        print("\n" + flops_report(made["eager"][0], inputs, seconds, args))


if __name__ == "__main__":
    main()
