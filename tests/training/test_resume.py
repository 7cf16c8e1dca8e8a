"""End to end, with real processes: a run killed by SIGKILL at a given step, or stopped by
SIGTERM, and resumed, ends exactly as the uninterrupted run: the same TensorBoard scalars at the
same steps and bit-identical final weights. SIGINT checkpoints and exits 130."""

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from artifacts.provenance import read_starts
from training.checkpoints import CheckpointStore
from training.loop import StopRequest

ROOT = Path(__file__).resolve().parents[2]
TOTAL_STEPS = 300
# Tiny and fast, but every part that a resume must restore is used: proportional priorities
# and β annealing, a 120-slot ring that wraps around several times, episodes ending by game
# over and by the frame cap, ε decay, target syncs, and checkpoints every 100 steps.
ARGUMENTS = [
    "experiment=demo",
    "replay=proportional",
    "env.game=breakout",
    "agent.device=cpu",
    f"train.total_steps={TOTAL_STEPS}",
    "train.batch_size=8",
    "train.learning_start_steps=40",
    "train.target_update_period_steps=50",
    "train.epsilon_decay_steps=200",
    "train.log_period_steps=25",
    "train.priority_histogram_period_steps=1000000",
    "replay.capacity=120",
    "env.max_episode_frames=400",
    "checkpoint.every_steps=100",
]
# One torch thread: as fast as two for batch 8 and far faster on a busy machine.
ENVIRONMENT = {**os.environ, "OMP_NUM_THREADS": "1", "TQDM_DISABLE": "1"}
STOPPED = re.compile(
    r"stopped by (SIGTERM|SIGINT) at step (\d+); resume with: python train\.py "
    r"resume=(\S+)\n"
)


# `python -c SIGNALLER STEP SIGNALS ARGUMENTS...` runs train.py and sends itself each of
# SIGNALS (comma-separated names) just before agent step STEP: a kill, stop or interrupt at a
# repeatable moment, so no test passes or fails by timing luck.
SIGNALLER = """
import os, runpy, signal, sys
from training import loop
step, names = int(sys.argv.pop(1)), sys.argv.pop(1).split(",")
act_and_store = loop.Training._act_and_store
def signal_then_act(self):
    if self.step == step:
        for name in names:
            os.kill(os.getpid(), getattr(signal, name))
    act_and_store(self)
loop.Training._act_and_store = signal_then_act
sys.argv[0] = "train.py"
runpy.run_path("train.py", run_name="__main__")
"""


def launch(
    run_dir: Path, *arguments: str, at_step: int | None = None, signals: str = "SIGKILL"
) -> subprocess.Popen:
    """Start `python train.py` (signalling itself at `at_step`, if given); its stderr goes to
    <run_dir>.stderr, beside the run."""
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    program = ["train.py"] if at_step is None else ["-c", SIGNALLER, str(at_step), signals]
    with open(run_dir.parent / f"{run_dir.name}.stderr", "a") as log:
        return subprocess.Popen(
            [sys.executable, *program, *arguments],
            cwd=ROOT,
            env=ENVIRONMENT,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )


def complete(run_dir: Path, *arguments: str) -> None:
    process = launch(run_dir, *arguments)
    assert process.wait(timeout=600) == 0, stderr(run_dir)


def stderr(run_dir: Path) -> str:
    return (run_dir.parent / f"{run_dir.name}.stderr").read_text()


def scalars(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar but the wall-clock `speed/*` ones, as (step, value) lists."""
    events = EventAccumulator(str(run_dir / "tensorboard"), size_guidance={"scalars": 0})
    events.Reload()
    return {
        tag: [(event.step, event.value) for event in events.Scalars(tag)]
        for tag in events.Tags()["scalars"]
        if not tag.startswith("speed/")
    }


def flat_tensors(value, prefix: str = "") -> dict[str, object]:
    if isinstance(value, dict):
        return {
            name: leaf
            for key, item in value.items()
            for name, leaf in flat_tensors(item, f"{prefix}{key}/").items()
        }
    if isinstance(value, list):
        return flat_tensors(dict(enumerate(value)), prefix)
    return {prefix: value}


def assert_same_run(run_dir: Path, reference: Path) -> None:
    assert scalars(run_dir) == scalars(reference)
    final, expected = (
        flat_tensors(torch.load(d / "agent_final.pt", weights_only=True))
        for d in (run_dir, reference)
    )
    assert final.keys() == expected.keys()
    for name, value in expected.items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(final[name], value), name
        else:
            assert final[name] == value, name


def uninterrupted(tmp_path_factory, name: str, *arguments: str) -> Path:
    """A run of `arguments` from start to end, in a fresh directory named after `name`."""
    run_dir = tmp_path_factory.mktemp(name) / "run"
    complete(run_dir, *arguments, f"hydra.run.dir={run_dir}")
    return run_dir


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """The uninterrupted run."""
    run_dir = uninterrupted(tmp_path_factory, "reference", *ARGUMENTS)
    curves = scalars(run_dir)
    # The comparison below means something only if these curves are there.
    assert [step for step, _ in curves["train/loss"]] == list(range(50, TOTAL_STEPS + 1, 25))
    assert len(curves["episode/return"]) >= 3
    assert len(curves["episode_vs_frames/return"]) == len(curves["episode/return"])
    return run_dir


@pytest.mark.parametrize(("kill_at_step", "checkpoint_step"), [(150, 100), (201, 200)])
def test_a_run_killed_and_resumed_is_the_uninterrupted_run(
    reference, tmp_path, kill_at_step, checkpoint_step
):
    """Killed between two checkpoints (its last 50 steps are lost and replayed) and right
    after one."""
    run_dir = tmp_path / "run"
    process = launch(run_dir, *ARGUMENTS, f"hydra.run.dir={run_dir}", at_step=kill_at_step)
    assert process.wait(timeout=600) == -signal.SIGKILL, stderr(run_dir)
    assert not (run_dir / "agent_final.pt").exists()
    assert CheckpointStore(run_dir / "checkpoints").read_latest()["step"] == checkpoint_step
    complete(run_dir, f"resume={run_dir}")
    assert_same_run(run_dir, reference)
    # Each start is recorded with the step it started from; the killed stretch is replayed.
    starts = read_starts(run_dir / "provenance.yaml")
    assert [start["step"] for start in starts] == [0, checkpoint_step]


def test_sigterm_checkpoints_exits_0_and_the_same_command_resumes_the_run(reference, tmp_path):
    run_dir = tmp_path / "run"
    arguments = [*ARGUMENTS, f"hydra.run.dir={run_dir}"]
    process = launch(run_dir, *arguments, at_step=150, signals="SIGTERM")
    assert process.wait(timeout=600) == 0
    stopped = STOPPED.search(stderr(run_dir))
    assert stopped is not None, stderr(run_dir)
    assert stopped.groups() == ("SIGTERM", "150", str(run_dir))
    assert CheckpointStore(run_dir / "checkpoints").read_latest()["step"] == 150
    assert not (run_dir / "agent_final.pt").exists()
    complete(run_dir, *arguments)  # re-running in the run dir
    assert_same_run(run_dir, reference)


def test_sigint_checkpoints_and_exits_130(tmp_path):
    run_dir = tmp_path / "run"
    process = launch(run_dir, *ARGUMENTS, f"hydra.run.dir={run_dir}", at_step=150, signals="SIGINT")
    assert process.wait(timeout=600) == 130
    stopped = STOPPED.search(stderr(run_dir))
    assert stopped is not None and stopped.groups()[:2] == ("SIGINT", "150"), stderr(run_dir)
    assert CheckpointStore(run_dir / "checkpoints").read_latest()["step"] == 150


def test_a_second_sigint_stops_at_once():
    stop = StopRequest()
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        stop.install()
        os.kill(os.getpid(), signal.SIGINT)
        assert stop.signal == signal.SIGINT
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)  # the handler runs in the main thread between bytecodes
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def test_a_second_sigint_stops_at_once_with_the_last_checkpoints_resume_line(tmp_path):
    run_dir = tmp_path / "run"
    process = launch(
        run_dir, *ARGUMENTS, f"hydra.run.dir={run_dir}", at_step=150, signals="SIGINT,SIGINT"
    )
    assert process.wait(timeout=600) == 130
    assert stderr(run_dir).splitlines()[-1] == (
        f"stopped by SIGINT at step 150; resume from its checkpoint at step 100 with: python "
        f"train.py resume={run_dir}"
    )


def test_a_second_process_in_a_live_run_directory_is_refused_and_changes_nothing(tmp_path):
    run_dir = tmp_path / "run"
    first = launch(run_dir, *ARGUMENTS, f"hydra.run.dir={run_dir}", at_step=150, signals="SIGSTOP")
    try:
        while first.poll() is None and _state(first.pid) != "T":
            time.sleep(0.05)
        assert first.poll() is None, stderr(run_dir)
        events = {p.name: p.read_bytes() for p in (run_dir / "tensorboard").glob("events*")}
        second = subprocess.run(
            [sys.executable, "train.py", *ARGUMENTS, f"hydra.run.dir={run_dir}"],
            cwd=ROOT,
            env=ENVIRONMENT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert second.returncode == 2
        assert second.stderr == (
            f"error: run directory {run_dir} is in use by another train.py process; wait for it "
            "to stop, or give another hydra.run.dir\n"
        )
        assert {p.name: p.read_bytes() for p in (run_dir / "tensorboard").glob("events*")} == events
    finally:
        first.kill()
        first.wait()


def _state(pid: int) -> str:
    """The process state letter from /proc (T: stopped)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_a_resumed_run_may_switch_cuda_graphs_and_is_still_the_uninterrupted_run(
    reference, tmp_path
):
    """`agent.cuda_graphs` changes no result beyond float rounding (none on a CPU), so a
    resumed run may change it; its config.yaml keeps the value the run started with."""
    run_dir = tmp_path / "run"
    process = launch(run_dir, *ARGUMENTS, f"hydra.run.dir={run_dir}", at_step=150)
    assert process.wait(timeout=600) == -signal.SIGKILL, stderr(run_dir)
    complete(run_dir, f"resume={run_dir}", "agent.cuda_graphs=true")
    assert_same_run(run_dir, reference)
    assert "cuda_graphs: false" in (run_dir / "config.yaml").read_text()


def test_a_pipelined_run_on_the_cpu_is_refused_on_resume_in_one_line(reference, tmp_path):
    """Pipelining is CUDA's: a run stored with agent.pipelined=true on the CPU cannot go on,
    and nothing in its directory changes."""
    run_dir = tmp_path / "run"
    shutil.copytree(reference, run_dir)
    config = run_dir / "config.yaml"
    assert config.read_text().count("pipelined: false") == 1
    config.write_text(config.read_text().replace("pipelined: false", "pipelined: true"))
    before = {path: path.read_bytes() for path in run_dir.rglob("*") if path.is_file()}
    refused = subprocess.run(
        [sys.executable, "train.py", f"resume={run_dir}"],
        cwd=ROOT,
        env=ENVIRONMENT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert refused.returncode == 2
    assert refused.stderr == "error: agent.pipelined=true needs agent.device=cuda\n"
    assert {path: path.read_bytes() for path in run_dir.rglob("*") if path.is_file()} == before


CUDA_ARGUMENTS = [
    *(argument for argument in ARGUMENTS if not argument.startswith("agent.device")),
    "agent.device=cuda",
    "agent.pipelined=true",
]


@pytest.fixture(scope="module")
def pipelined_cuda_reference(tmp_path_factory) -> Path:
    """The uninterrupted run in pipelined mode, on the GPU."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    return uninterrupted(tmp_path_factory, "pipelined", *CUDA_ARGUMENTS)


def test_a_pipelined_cuda_run_stopped_with_an_update_in_flight_resumes(
    pipelined_cuda_reference, tmp_path
):
    """Stopped at step 154, while the update started at step 152 is in flight (its priorities
    are written at step 156, when the next one starts): the checkpoint keeps it as it is, and
    the resumed run finishes, logging the loss at the uninterrupted run's steps. Not its
    values: cuDNN's kernels are not deterministic, and rounding differences grow into other
    priorities and batches."""
    run_dir = tmp_path / "run"
    arguments = (*CUDA_ARGUMENTS, f"hydra.run.dir={run_dir}")
    process = launch(run_dir, *arguments, at_step=154, signals="SIGTERM")
    assert process.wait(timeout=600) == 0, stderr(run_dir)
    in_flight = CheckpointStore(run_dir / "checkpoints").read_latest()["state"]["learning"]
    assert in_flight["step"] == 152
    complete(run_dir, f"resume={run_dir}")
    assert (run_dir / "agent_final.pt").is_file()
    resumed, expected = scalars(run_dir), scalars(pipelined_cuda_reference)
    losses = [step for step, _ in expected["train/loss"]]
    assert [step for step, _ in resumed["train/loss"]] == losses == list(range(50, 301, 25))


# Tests every 100 steps, three episodes each with ε 0.2 (the network picks most actions): a run
# stopped at step 201 has the tests of steps 100 and 200 in its worker, played or waiting.
TESTED = [
    *ARGUMENTS,
    "evaluation.every_frames=400",
    "evaluation.frames=1200",
    "evaluation.epsilon=0.2",
]


@pytest.fixture(scope="module")
def inline_reference(tmp_path_factory) -> Path:
    """The uninterrupted run, its tests played inline."""
    run_dir = uninterrupted(tmp_path_factory, "inline", *TESTED, "evaluation.worker=false")
    assert [step for step, _ in scalars(run_dir)["eval/score"]] == [100, 200, 300]
    return run_dir


@pytest.mark.parametrize(
    ("signals", "status", "checkpoint_step"),
    [("SIGKILL", -signal.SIGKILL, 200), ("SIGTERM", 0, 201)],
)
def test_a_run_stopped_with_tests_in_its_worker_resumes_to_the_inline_runs_results(
    inline_reference, tmp_path, monkeypatch, signals, status, checkpoint_step
):
    run_dir = tmp_path / "run"
    marker = f"PER_ATARI_TEST_RUN={run_dir}"  # inherited by the run's every process
    monkeypatch.setitem(ENVIRONMENT, *marker.split("=", 1))
    process = launch(run_dir, *TESTED, f"hydra.run.dir={run_dir}", at_step=201, signals=signals)
    assert process.wait(timeout=600) == status, stderr(run_dir)
    deadline = time.monotonic() + 120  # a worker left alone notices at its next action
    while _processes_with(marker):
        assert time.monotonic() < deadline, "the evaluation worker outlived its run"
        time.sleep(0.1)
    state = CheckpointStore(run_dir / "checkpoints").read_latest()["state"]
    # The test of step 200 was requested just before that step's checkpoint was written.
    assert state["step"] == checkpoint_step and 200 in state["pending_test_steps"]
    complete(run_dir, f"resume={run_dir}")
    assert_same_run(run_dir, inline_reference)
    assert _texts(run_dir) == _texts(inline_reference)
    for name in ("agent_latest.pt", "agent_best.pt"):
        snapshot, expected = (
            flat_tensors(torch.load(d / name, weights_only=True))
            for d in (run_dir, inline_reference)
        )
        assert snapshot.keys() == expected.keys()
        for key, value in expected.items():
            if isinstance(value, torch.Tensor):
                assert torch.equal(snapshot[key], value), (name, key)
            else:
                assert snapshot[key] == value, (name, key)
    assert not (run_dir / "pending_tests").exists()


def _processes_with(marker: str) -> list[int]:
    """Live processes whose environment holds `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker.encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:  # gone, or not ours
            continue
    return found


def _texts(run_dir: Path) -> dict[str, list]:
    """The text summaries (the tests' per-episode scores), as (step, text) lists."""
    events = EventAccumulator(str(run_dir / "tensorboard"), size_guidance={"tensors": 0})
    events.Reload()
    return {
        tag: [(event.step, event.tensor_proto.string_val) for event in events.Tensors(tag)]
        for tag in events.Tags()["tensors"]
    }


# Forgetting by priority: the 120-slot memory is full from about step 125 on and then forgets
# the transition with the lowest |δ| change on every step. Checkpoints every 50 steps, so the
# ones at 150 and 200 bring a frame copy up to date incrementally, by TransitionStorage's ring
# cursor, after writes all over the memory.
BY_PRIORITY = [
    *(argument for argument in ARGUMENTS if not argument.startswith("checkpoint.every_steps=")),
    "checkpoint.every_steps=50",
    "replay.eviction=lowest_priority",
    "replay.priority_signal=td_error_change",
]


@pytest.fixture(scope="module")
def by_priority_reference(tmp_path_factory) -> Path:
    """The uninterrupted run that forgets by priority."""
    return uninterrupted(tmp_path_factory, "by_priority", *BY_PRIORITY)


@pytest.mark.parametrize(("kill_at_step", "checkpoint_step"), [(180, 150), (230, 200)])
def test_a_run_that_forgets_by_priority_killed_and_resumed_is_the_uninterrupted_run(
    by_priority_reference, reference, tmp_path, kill_at_step, checkpoint_step
):
    run_dir = tmp_path / "run"
    process = launch(run_dir, *BY_PRIORITY, f"hydra.run.dir={run_dir}", at_step=kill_at_step)
    assert process.wait(timeout=600) == -signal.SIGKILL, stderr(run_dir)
    assert CheckpointStore(run_dir / "checkpoints").read_latest()["step"] == checkpoint_step
    complete(run_dir, f"resume={run_dir}")
    assert_same_run(run_dir, by_priority_reference)
    assert scalars(by_priority_reference) != scalars(reference)  # it did forget differently


MINATAR_ARGUMENTS = [
    "experiment=minatar_per_dqn",
    "env.game=seaquest",
    "agent.device=cpu",
    f"train.total_steps={TOTAL_STEPS}",
    "train.batch_size=8",
    "train.learning_start_steps=40",
    "train.target_update_period_steps=50",
    "train.epsilon_decay_steps=200",
    "train.log_period_steps=25",
    "replay.capacity=120",
    "evaluation.every_frames=100",
    "evaluation.frames=60",
    "checkpoint.every_steps=100",
]


@pytest.fixture(scope="module")
def minatar_reference(tmp_path_factory) -> Path:
    run_dir = uninterrupted(tmp_path_factory, "minatar", *MINATAR_ARGUMENTS)
    assert len(scalars(run_dir)["episode/return"]) >= 3
    return run_dir


def test_a_minatar_run_killed_and_resumed_is_the_uninterrupted_run(minatar_reference, tmp_path):
    """The game's state, its generator and the sticky action come back exactly."""
    run_dir = tmp_path / "run"
    process = launch(run_dir, *MINATAR_ARGUMENTS, f"hydra.run.dir={run_dir}", at_step=170)
    assert process.wait(timeout=600) == -signal.SIGKILL, stderr(run_dir)
    assert CheckpointStore(run_dir / "checkpoints").read_latest()["step"] == 100
    complete(run_dir, f"resume={run_dir}")
    assert_same_run(run_dir, minatar_reference)
