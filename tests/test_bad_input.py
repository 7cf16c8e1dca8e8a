"""Bad input through the real command line: a non-zero exit, one line on stderr naming the key
or file and what is allowed, and nothing on disk changed: no run directory is created, and an
existing run's files stay byte-identical."""

import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from replay.registry import SAMPLERS
from training.checkpoints import CheckpointStore

ROOT = Path(__file__).resolve().parents[1]
ENVIRONMENT = {**os.environ, "OMP_NUM_THREADS": "1", "TQDM_DISABLE": "1"}
RUN = [  # a finished 12-step run with checkpoints at steps 10 and 12
    "experiment=demo",
    "env.game=breakout",
    "agent.device=cpu",
    "train.total_steps=12",
    "train.batch_size=8",
    "train.learning_start_steps=8",
    "replay.capacity=64",
    "checkpoint.every_steps=5",
    "train.log_period_steps=5",
]
NEW = "{tmp}/new/run"  # a run directory that must not come to exist
FRAMES_BYTES = 64 * 84 * 84  # RUN's frame copy: replay.capacity 84x84 frames, one checksum
CORES = len(os.sched_getaffinity(0))
PRESETS = sorted(path.stem for path in (ROOT / "configs" / "replay").glob("*.yaml"))

# id: (command-line arguments, the one line expected on stderr); {tmp} is the case's directory,
# {run} an existing run directory, {state} its newest state file.
CASES = {
    "negative alpha": (
        ["replay=proportional", "replay.priority_exponent=-1", f"hydra.run.dir={NEW}"],
        "replay.priority_exponent=-1 is not allowed: must be >= 0",
    ),
    "beta0 above 1": (
        ["replay=proportional", "replay.importance_exponent=1.5", f"hydra.run.dir={NEW}"],
        "replay.importance_exponent=1.5 is not allowed: must be in [0, 1]",
    ),
    "capacity below batch": (
        ["replay.capacity=16", f"hydra.run.dir={NEW}"],
        "replay.capacity=16 is not allowed: must be at least train.batch_size and "
        "agent.history_length + 2, an integer",
    ),
    "learning start below batch": (
        ["train.learning_start_steps=8", f"hydra.run.dir={NEW}"],
        "train.learning_start_steps=8 is not allowed: must be an integer from train.batch_size "
        "to train.total_steps (a run with no update)",
    ),
    "learning start after the last step": (
        ["train.total_steps=1000", "train.learning_start_steps=5000", f"hydra.run.dir={NEW}"],
        "train.learning_start_steps=5000 is not allowed: must be an integer from "
        "train.batch_size to train.total_steps (a run with no update)",
    ),
    "misspelt key added with +": (
        ["+env.gmae=pong", f"hydra.run.dir={NEW}"],
        "env.gmae is not a setting; env has: frame_skip, full_action_space, game, kind, "
        "max_episode_frames, noop_max, repeat_action_probability, screen_size",
    ),
    "an Atari game on MinAtar": (
        ["experiment=minatar_dqn", "env.game=pong", f"hydra.run.dir={NEW}"],
        "env.game=pong is not allowed: MinAtar's games are asterix, breakout, freeway, seaquest, "
        "space_invaders",
    ),
    "the Atari network on MinAtar frames": (
        ["env=minatar", f"hydra.run.dir={NEW}"],
        "agent.network=nature is not allowed here: the Nature network takes 84x84 frames, not "
        "(4, 10, 10)",
    ),
    "an Atari setting on MinAtar": (
        ["experiment=minatar_dqn", "+env.noop_max=30", f"hydra.run.dir={NEW}"],
        "env.noop_max is not a setting; env has: difficulty_ramping, frame_skip, game, kind, "
        "max_episode_frames, repeat_action_probability",
    ),
    "threads beyond the cores": (
        ["threads=100000", f"hydra.run.dir={NEW}"],
        f"threads=100000 is not allowed: must be auto or an integer from 1 to {CORES} (the "
        "cores this process may use)",
    ),
    "a seed beyond 64 bits": (
        ["seed=99999999999999999999999", f"hydra.run.dir={NEW}"],
        "seed=99999999999999999999999 is not allowed: must be an integer from 0 to "
        "9223372036854775807",
    ),
    "a falling beta schedule": (
        [
            "replay=proportional",
            "replay.importance_exponent=0.9",
            "replay.importance_exponent_final=0.1",
            f"hydra.run.dir={NEW}",
        ],
        "replay.importance_exponent_final=0.1 is not allowed: must be at least "
        "replay.importance_exponent (β rises to it) and at most 1",
    ),
    "a replay kind without its group": (
        ["replay.kind=proportional", f"hydra.run.dir={NEW}"],
        "replay.kind=proportional is not allowed with replay=uniform: choose the sampler and its "
        "settings together with replay=proportional",
    ),
    "a deleted config group": (
        ["~replay", f"hydra.run.dir={NEW}"],
        f"the config has no replay section: choose one with replay={'|'.join(PRESETS)}",
    ),
    "the misspelt key Hydra suggests adding": (
        ["+replay.capcity=5", f"hydra.run.dir={NEW}"],
        "replay.capcity is not a setting; replay has: capacity, device, eviction, "
        "importance_exponent, importance_exponent_final, importance_exponent_final_step, kind, "
        "priority_epsilon, priority_signal, weight_normalization",
    ),
    "pipelined on the CPU": (
        ["agent.pipelined=true", "agent.device=cpu", f"hydra.run.dir={NEW}"],
        "agent.pipelined=true needs agent.device=cuda",
    ),
    "replay frames on a device the learner is not on": (
        ["replay.device=cuda", "agent.device=cpu", f"hydra.run.dir={NEW}"],
        "replay.device=cuda is not allowed: must be cpu, or agent.device's CUDA device with "
        "replay.eviction=fifo",
    ),
    "negative target period": (
        ["train.target_update_period_steps=-1", f"hydra.run.dir={NEW}"],
        "train.target_update_period_steps=-1 is not allowed: must be a positive integer",
    ),
    "negative checkpoint period": (
        ["checkpoint.every_steps=-5", f"hydra.run.dir={NEW}"],
        "checkpoint.every_steps=-5 is not allowed: must be a positive integer",
    ),
    "one checkpoint kept": (
        ["checkpoint.keep=1", f"hydra.run.dir={NEW}"],
        "checkpoint.keep=1 is not allowed: must be an integer >= 2 (a complete checkpoint must "
        "survive a failed save)",
    ),
    "unknown replay kind": (
        ["replay.kind=sorted", f"hydra.run.dir={NEW}"],
        f"replay.kind=sorted is not allowed: must be one of {', '.join(SAMPLERS)}",
    ),
    "unknown game": (
        ["env.game=pongg", f"hydra.run.dir={NEW}"],
        "unknown game 'pongg' (env.game); did you mean: pong? Accepted: ale-py ROM ids (e.g. "
        "breakout), display names (Breakout) or gymnasium ids (ALE/Breakout-v5).",
    ),
    "capacity not a number": (
        ["replay.capacity=abc", f"hydra.run.dir={NEW}"],
        "replay.capacity=abc is not allowed: must be at least train.batch_size and "
        "agent.history_length + 2, an integer",
    ),
    "total steps a float": (
        ["train.total_steps=1e6", f"hydra.run.dir={NEW}"],
        "train.total_steps=1000000.0 is not allowed: must be a positive integer",
    ),
    "a bad job in a sweep, before its first job starts": (
        ["-m", *RUN, "replay.priority_signal=td_error,bogus", "hydra.sweep.dir={tmp}/new/sweep"],
        "job 1 (replay.priority_signal=bogus): replay.priority_signal=bogus is not allowed: must "
        "be one of td_error, td_error_change, parameter_change, huber_loss",
    ),
    "run directory that is a file": (
        ["hydra.run.dir={tmp}/a_file"],
        "hydra.run.dir={tmp}/a_file cannot be used: {tmp}/a_file is a file, not a directory",
    ),
    "resume of a file": (
        ["resume={tmp}/a_file"],
        "resume={tmp}/a_file cannot be used: {tmp}/a_file is a file, not a directory",
    ),
    "run directory that cannot exist": (
        ["hydra.run.dir={tmp}/a_file/run"],
        "hydra.run.dir={tmp}/a_file/run cannot be used: {tmp}/a_file is a file, so "
        "{tmp}/a_file/run cannot be created",
    ),
    "resume of a directory without a run": (
        ["resume={tmp}/new/run"],
        "resume={tmp}/new/run is not a run directory: no config.yaml",
    ),
    "run directory of another config": (
        [*RUN, "seed=1", "hydra.run.dir={run}"],
        "run directory {run} holds a different run: seed is 0 there, 1 here",
    ),
    "resume overriding the config": (
        ["resume={run}", "seed=1"],
        "resume={run}: the run has seed=0; a resumed run keeps its config",
    ),
    "resume into another directory": (
        ["resume={run}", f"hydra.run.dir={NEW}"],
        f"resume={{run}} with hydra.run.dir={NEW} is not allowed: a resumed run continues in "
        "its own directory",
    ),
    "corrupted checkpoint": (
        ["resume={run}"],
        "checkpoint {state} is corrupted or truncated (BadZipFile); delete it to resume from "
        "the one before",
    ),
    "truncated checkpoint": (
        [*RUN, "hydra.run.dir={run}"],
        "checkpoint {state} is corrupted or truncated (BadZipFile); delete it to resume from "
        "the one before",
    ),
    "checkpoint of another version": (
        ["resume={run}"],
        "checkpoint {state} has format version 99; this version of the application reads version 1",
    ),
    "checkpoint of another replay kind": (
        ["resume={run}"],
        "checkpoint {state} is of another run: replay.kind is proportional there, uniform here",
    ),
    "checkpoint of another game": (
        ["resume={run}"],
        "checkpoint {state} is of another run: env.game is pong there, breakout here",
    ),
    "checkpoint of another memory size": (
        ["resume={run}"],
        "checkpoint {state} is of another run: replay.capacity is 128 there, 64 here",
    ),
    "truncated replay frames": (
        ["resume={run}"],
        "checkpoint {state}: its replay frames frames-0.bin are missing or truncated (1000 "
        "bytes); delete it to resume from the one before",
    ),
    "replay frames changed on disk": (
        ["resume={run}"],
        f"checkpoint {{state}}: its replay frames frames-0.bin were changed on disk (bytes "
        f"0-{FRAMES_BYTES - 1} fail their checksum); delete it to resume from the one before",
    ),
    "an empty directory made before, above the run directory": (
        ["seed=-1", "hydra.run.dir={tmp}/made_before/new/run"],
        "seed=-1 is not allowed: must be an integer from 0 to 9223372036854775807",
    ),
    "an integer beyond 64 bits": (
        ["env.noop_max=99999999999999999999999", f"hydra.run.dir={NEW}"],
        "env.noop_max=99999999999999999999999 is not allowed: must be an integer >= 0, at most "
        "9223372036854775807",
    ),
    "a rising epsilon schedule": (
        ["train.epsilon_start=0.01", "train.epsilon_final=1", f"hydra.run.dir={NEW}"],
        "train.epsilon_final=1 is not allowed: must be in [0, train.epsilon_start] (ε falls to it)",
    ),
}
# Refused once the run is built (its frames are checked as they are read into the replay),
# after the emulator printed its banner.
AFTER_BUILDING = {"replay frames changed on disk"}
EMULATOR_BANNER = ("A.L.E: Arcade Learning Environment", "[Powered by Stella]")
DAMAGE = {
    **{
        case: lambda state, run: (run.parent / "a_file").write_text("not a directory\n")
        for case in (
            "run directory that is a file",
            "resume of a file",
            "run directory that cannot exist",
        )
    },
    "corrupted checkpoint": lambda state, run: _flip_middle_byte(state),
    "truncated checkpoint": lambda state, run: os.truncate(state, state.stat().st_size // 2),
    "checkpoint of another version": lambda state, run: _set_version(state, 99),
    "truncated replay frames": lambda state, run: os.truncate(state.parent / "frames-0.bin", 1000),
    "replay frames changed on disk": lambda state, run: _flip_frames_of_an_unfinished_run(run),
    "an empty directory made before, above the run directory": lambda state, run: (
        run.parent / "made_before"
    ).mkdir(),
    "checkpoint of another replay kind": lambda state, run: _set_identity(
        state, "replay.kind", "proportional"
    ),
    "checkpoint of another game": lambda state, run: _set_identity(state, "env.game", "pong"),
    "checkpoint of another memory size": lambda state, run: _set_identity(
        state, "replay.capacity", 128
    ),
}


def _flip_middle_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _flip_frames_of_an_unfinished_run(run: Path) -> None:
    """As if the run had stopped at its last checkpoint, before its final snapshot (a finished
    run's resume reads no frames), and a byte of that checkpoint's frame copy then changed."""
    (run / "agent_final.pt").unlink()
    _flip_middle_byte(run / "checkpoints" / "frames-0.bin")


def _set_version(path: Path, version: int) -> None:
    payload = torch.load(path, weights_only=True)
    payload["version"] = version
    torch.save(payload, path)


def _set_identity(path: Path, key: str, value) -> None:
    """Make the checkpoint claim another run's `key` (as if copied from that run)."""
    payload = torch.load(path, weights_only=True)
    payload["state"]["identity"][key] = value
    torch.save(payload, path)


def snapshot(directory: Path) -> dict[str, bytes | None]:
    """Every path under `directory`: file contents, None for directories."""
    return {
        str(path.relative_to(directory)): None if path.is_dir() else path.read_bytes()
        for path in sorted(directory.rglob("*"))
    }


def train(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "train.py", *arguments],
        cwd=ROOT,
        env=ENVIRONMENT,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict[str, tuple]:
    """Runs every case, a few processes at a time: (exit code, stderr, expected line, files
    before, files after)."""
    finished = tmp_path_factory.mktemp("finished") / "run"
    assert train(*RUN, f"hydra.run.dir={finished}").returncode == 0
    state = CheckpointStore(finished / "checkpoints").state_files()[-1]
    assert state.name == "state-000000000012-frames0.pt"
    prepared = {}
    for case, (arguments, line) in CASES.items():
        tmp = tmp_path_factory.mktemp("case")
        run = tmp / "run"
        shutil.copytree(finished, run)
        DAMAGE.get(case, lambda *_: None)(run / "checkpoints" / state.name, run)
        names = dict(tmp=tmp, run=run, state=run / "checkpoints" / state.name)
        prepared[case] = (
            [a.format(**names) for a in arguments],
            line.format(**names),
            tmp,
            snapshot(tmp),
        )

    def run_case(case: str) -> tuple:
        arguments, line, tmp, before = prepared[case]
        result = train(*arguments)
        return result.returncode, result.stderr, line, before, snapshot(tmp)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(CASES, pool.map(run_case, CASES), strict=True))


@pytest.mark.parametrize("case", CASES)
def test_bad_input_is_refused_with_one_line_and_changes_nothing(outcomes, case):
    returncode, stderr, line, before, after = outcomes[case]
    *earlier, last = stderr.splitlines()
    assert (last, stderr.endswith("\n")) == (f"error: {line}", True)
    # Only the emulator's banner may come before, where the refusal comes once it is built.
    assert all(text.startswith(EMULATOR_BANNER) for text in earlier)
    assert not earlier or case in AFTER_BUILDING
    assert returncode == 2
    assert after.keys() == before.keys()
    assert after == before


# Apart from CASES and their module fixture (a run and every case's process): `pytest -k cuda`
# on a GPU machine selects this test alone here, and skips it before anything runs.
@pytest.mark.skipif(
    torch.cuda.is_available(), reason="with a GPU, agent.device=cuda is no bad input"
)
def test_cuda_without_a_gpu_is_refused_with_one_line_and_changes_nothing(tmp_path):
    result = train("agent.device=cuda", f"hydra.run.dir={tmp_path}/new/run")
    assert (result.returncode, result.stderr) == (
        2,
        "error: agent.device='cuda' but 0 CUDA device(s) are available; use one of 'auto', "
        "'cpu', 'cuda' or 'cuda:N'\n",
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "argument,lines",
    [
        (
            "replay=sorted",
            "In 'config': Could not find 'replay/sorted'\n\nAvailable options in 'replay':\n"
            + "".join(f"\t{preset}\n" for preset in PRESETS),
        ),
        (
            "replay.capcity=5",
            "Could not override 'replay.capcity'.\nTo append to your config use "
            "+replay.capcity=5\nKey 'capcity' is not in struct\n",
        ),
    ],
    ids=["unknown group option", "unknown key"],
)
def test_hydra_refuses_unknown_options_and_keys_before_creating_anything(tmp_path, argument, lines):
    """Hydra's own messages, before `main` runs: several lines, exit code 1."""
    result = train(argument, f"hydra.run.dir={tmp_path}/new/run")
    assert result.returncode == 1
    assert result.stderr.startswith(lines)
    assert list(tmp_path.iterdir()) == []


def test_a_replay_beyond_the_machines_memory_is_refused_before_anything_exists(tmp_path):
    result = train("replay.capacity=1000000000000", f"hydra.run.dir={tmp_path}/new/run")
    assert result.returncode == 2
    assert result.stderr.startswith(
        "error: replay.capacity=1000000000000 is not allowed: a full replay needs 7216000.0 GB "
        "and this machine has "
    )
    assert result.stderr.count("\n") == 1
    assert not (tmp_path / "new").exists()


LONG = "x" * 300  # past the 255 bytes a file name may have


@pytest.mark.parametrize(
    ("argument", "line"),
    [
        (
            "~replay",
            f"the config has no replay section: choose one with replay={'|'.join(PRESETS)}",
        ),
        (
            f"env.game={LONG}",
            f"unknown game '{LONG}' (env.game). Accepted: ale-py ROM ids (e.g. breakout), display "
            "names (Breakout) or gymnasium ids (ALE/Breakout-v5).",
        ),
        (
            f"replay.kind={LONG}",
            f"replay.kind={LONG} is not allowed: must be one of {', '.join(SAMPLERS)}",
        ),
    ],
    ids=["a deleted group", "a game name too long for a file", "a replay kind too long for a file"],
)
def test_bad_input_with_the_default_run_directory_is_one_line_and_leaves_nothing(
    tmp_path, argument, line
):
    """The default run directory, runs/<game>/<replay kind>/<date>, is named by the game and
    the replay kind: without them it must still resolve, and names that are neither are
    refused before a directory is named after them."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), argument],
        cwd=tmp_path,
        env=ENVIRONMENT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert (result.returncode, result.stderr) == (2, f"error: {line}\n")
    assert list(tmp_path.iterdir()) == []


def test_resuming_a_finished_run_says_so_and_changes_nothing(tmp_path):
    run = tmp_path / "run"
    assert train(*RUN, f"hydra.run.dir={run}").returncode == 0
    before = snapshot(tmp_path)
    result = train(f"resume={run}")
    assert (result.returncode, result.stderr) == (0, f"run {run} is finished: nothing to do\n")
    assert snapshot(tmp_path) == before
