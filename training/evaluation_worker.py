"""The process that plays the periodic tests beside training (`evaluation.worker: true`).

Protocol, over two one-way pipes of pickled messages. The training process sends the settings
first (`play_test`'s: env arguments, ε and frame budget; the evaluation generator, the device,
whether to act through CUDA graphs), then requests, each the path of an agent snapshot
(`artifacts.snapshot`) to test; the worker plays them strictly in the order sent and answers
each, in that order, with `Played(result, rng_state)` (`rng_state`: the evaluation generator
after the test, where the next test starts) or with the line that says why it failed (a str),
after which it exits. The worker owns the evaluation stream from the state it was given, so the
training process gives it the state the oldest test it will send starts from.
"""

import os
import signal
import subprocess
import sys
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection, Pipe
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from agents.compilation import error_line
from artifacts.snapshot import load_agent_snapshot
from evaluation.protocols import EvaluationResult, Policy, evaluate_noop

# A fresh interpreter (a fork would inherit torch's thread pools and locks mid-use), started
# with `subprocess` rather than multiprocessing's spawn: that one fails inside a joblib (loky)
# sweep worker, whose start method a fresh interpreter does not know, and re-imports the
# parent's __main__ (train.py, Hydra). SIGINT, SIGTERM, SIGUSR1 and SIGUSR2 are ignored from
# its first line on: a Ctrl-C reaches the whole process group, and a scheduler's SIGTERM and
# its warning before a time limit or preemption (submitit's USR2) every process of the job; the
# training process decides when the run stops.
WORKER_COMMAND = (
    "import signal, sys\n"
    "for name in ('SIGINT', 'SIGTERM', 'SIGUSR1', 'SIGUSR2'):\n"
    "    signal.signal(getattr(signal, name), signal.SIG_IGN)\n"
    "sys.path.insert(0, sys.argv[1])\n"
    "from training.evaluation_worker import serve\n"
    "serve(*map(int, sys.argv[2:]))\n"
)
PACKAGE_ROOT = str(Path(__file__).resolve().parents[1])  # where `training` was imported from


class Interrupted(Exception):
    """A stop was requested in the middle of a periodic test."""


class EvaluationWorkerError(RuntimeError):
    """The worker failed or died, so the run cannot get its test scores; one line."""


@dataclass(frozen=True)
class Played:
    result: EvaluationResult
    rng_state: dict


def play_test(
    policy: Policy,
    env_kwargs: dict,
    *,
    rng: np.random.Generator,
    epsilon: float,
    frames: int,
    stop_requested: Callable[[], bool],
) -> EvaluationResult:
    """The paper's test of `policy`: the one call the inline test and the worker both make, so
    both draw the same numbers from `rng`. A stop request raises Interrupted at the next
    action, `rng` part-way (a test at the paper's size takes minutes on a CPU)."""

    def act(*args, **kwargs) -> int:
        if stop_requested():
            raise Interrupted
        return policy.act(*args, **kwargs)

    stoppable = SimpleNamespace(history_length=policy.history_length, act=act)
    return evaluate_noop(stoppable, env_kwargs, rng=rng, epsilon=epsilon, max_frames=frames)


class EvaluationWorker:
    """A process playing the tests `submit`ted to it, on `device` with one torch thread: on
    CPU its forward passes are the inline test's, bit for bit. On CUDA it acts through a
    captured forward pass only with `cuda_graphs` (the run's `agent.cuda_graphs`), and then
    only once the graph has matched the eager pass. It exits by itself when the training
    process dies (at its next action, or when it waits for a request)."""

    def __init__(
        self, settings: dict, *, rng: np.random.Generator, device: str, cuda_graphs: bool = False
    ):
        request_end, self._requests = Pipe(duplex=False)
        self._results, result_end = Pipe(duplex=False)
        ends = (request_end.fileno(), result_end.fileno())
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-c", WORKER_COMMAND, PACKAGE_ROOT]
                + [str(fd) for fd in (*ends, os.getpid())],
                pass_fds=ends,
            )
        except OSError as error:
            self._requests.close()
            self._results.close()
            raise EvaluationWorkerError(f"the evaluation worker could not start: {error}") from None
        finally:
            # The worker's ends: with them closed here, its death reads as the end of a pipe.
            request_end.close()
            result_end.close()
        self._outstanding: deque[int] = deque()  # steps sent and not answered, oldest first
        self._send((settings, rng, device, cuda_graphs), step=None)

    def submit(self, step: int, agent_file: Path) -> None:
        self._send(str(agent_file), step)
        self._outstanding.append(step)

    def _send(self, message, step: int | None) -> None:
        try:
            self._requests.send(message)
        except OSError:  # the worker is gone, and its end of the pipe with it
            raise self._died(step) from None

    def played(self, timeout: float = 0.0) -> list[Played]:
        """The answers that arrived, in request order, waiting up to `timeout` seconds for the
        first; a failure or the worker's death is an EvaluationWorkerError."""
        answers = []
        while self._outstanding and self._results.poll(0.0 if answers else timeout):
            step = self._outstanding[0]
            try:
                answer = self._results.recv()
            except EOFError:
                raise self._died(step) from None
            if isinstance(answer, str):
                raise EvaluationWorkerError(
                    f"the periodic test at step {step} failed in the evaluation worker: {answer}"
                )
            self._outstanding.popleft()
            answers.append(answer)
        return answers

    def _died(self, step: int | None) -> EvaluationWorkerError:
        try:
            code = self.process.wait(timeout=10)
            how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
        except subprocess.TimeoutExpired:
            how = "it stopped answering"
        test = "" if step is None else f" before finishing the periodic test at step {step}"
        return EvaluationWorkerError(f"the evaluation worker died ({how}){test}")

    def close(self) -> None:
        """End the worker now; a test it was playing is simply not answered. It holds nothing
        that must be saved (the training process writes every file), so it is killed."""
        self._requests.close()
        self._results.close()
        self.process.kill()
        self.process.wait()


def serve(requests: int, results: int, parent: int) -> None:
    """The worker (`WORKER_COMMAND`): the protocol's messages from the pipe `requests`, answers
    into `results`, until the training process (pid `parent`) closes its ends or dies."""
    requests, results = Connection(requests, writable=False), Connection(results, readable=False)
    torch.set_num_threads(1)
    try:
        settings, rng, device, cuda_graphs = requests.recv()
        while True:
            agent_file = requests.recv()
            try:
                policy, _ = load_agent_snapshot(agent_file, device, cuda_graphs)
                result = play_test(
                    policy, **settings, rng=rng, stop_requested=lambda: os.getppid() != parent
                )
            except Interrupted:
                return
            except Exception as error:
                results.send(error_line(error))
                return
            results.send(Played(result, rng.bit_generator.state))
    except (EOFError, BrokenPipeError):
        return  # the training process closed its ends, or is gone
