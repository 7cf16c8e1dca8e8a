"""benchmarks/gpu_figures.py in pieces, with a stand-in for benchmarks/throughput.py: one file
per piece, overrides passed through, a piece stopped (with what it started) at its time limit,
and one table merged from pieces saved on different leases, a piece measured with other
overrides in a row of its own."""

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SPEC = importlib.util.spec_from_file_location("gpu_figures", ROOT / "benchmarks" / "gpu_figures.py")
gpu_figures = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(gpu_figures)

# Writes the figures benchmarks/throughput.py would, from its overrides: 1,000 agent steps/s
# with proportional replay, 1,100 with uniform, 500 more with CUDA graphs, plus the seed (the
# concurrent runs differ).
STAND_IN = """
import json, sys
overrides = dict(a.split("=", 1) for a in sys.argv[1:] if "=" in a and not a.startswith("--"))
path = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("--json="))
rate = (1100.0 if overrides["replay"] == "uniform" else 1000.0) + int(overrides["seed"])
rate += 500 if overrides.get("agent.cuda_graphs") == "true" else 0
rows = {"replay add": 10.0, "learn: replay.sample": 20.0, "learn: update_priorities": 10.0}
figures = {"steps_per_second": rate, "steps_per_second_without_test": rate + 50,
           "ms_per_update": 2.5, "us_per_step": rows, "total_us_per_step": 1e6 / rate}
record = {"device": "cuda:0 (stand-in)", "overrides": sys.argv[1:],
          "passes": {"nature": figures}}
open(path, "w").write(json.dumps(record))
print("tables of", " ".join(sys.argv[1:]))
"""


@pytest.fixture
def stand_in(tmp_path, monkeypatch) -> Path:
    script = tmp_path / "throughput.py"
    script.write_text(STAND_IN)
    monkeypatch.setattr(gpu_figures, "THROUGHPUT", script)
    return script


def test_set_replaces_a_configurations_value_and_adds_new_keys():
    args = gpu_figures.parse_args(
        ["--out", "x", "--set", "agent.pipelined=false", "--set", "agent.cuda_graphs=true"]
    )
    assert gpu_figures.overrides_of(args, "pipelined", 3) == [
        "replay=proportional",
        "agent.device=cuda",
        "replay.capacity=1000000",
        "seed=3",
        "agent.pipelined=false",
        "agent.cuda_graphs=true",
    ]


def test_each_piece_is_one_file_and_the_table_merges_pieces_from_two_leases(
    stand_in, tmp_path, capsys
):
    first, second = tmp_path / "lease1", tmp_path / "lease2"
    gpu_figures.main(["--out", str(first), "--only", "exact", "uniform"])
    gpu_figures.main(
        ["--out", str(second), "--only", "exact", "concurrent", "--concurrent", "3"]
        + ["--set", "agent.cuda_graphs=true"]
    )
    assert sorted(p.name for p in first.iterdir()) == ["exact.json", "uniform.json"]
    assert sorted(p.name for p in second.iterdir()) == ["concurrent.json", "exact.json"]
    concurrent = json.loads((second / "concurrent.json").read_text())
    assert len(concurrent["runs"]) == 3 and concurrent["set"] == ["agent.cuda_graphs=true"]
    assert all("agent.cuda_graphs=true" in command for command in concurrent["commands"])
    capsys.readouterr()
    gpu_figures.main(["--table", str(first), str(second)])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert rows[2:] == [  # the eager and the graphs' `exact` side by side
        "| the paper's config | 1,000 | 1,050 | 2.50 | 4.0 % |",
        "| the paper's config (--set agent.cuda_graphs=true) | 1,500 | 1,550 | 2.50 | 6.0 % |",
        "| uniform replay | 1,100 | 1,150 | 2.50 | 4.4 % |",
        "| 3 runs at once, each (--set agent.cuda_graphs=true) | 1,501 (min 1,500, max 1,502; "
        "together 4,503) |  |  |  |",
    ]


def test_the_table_compares_prioritized_with_uniform_only_under_the_same_overrides(
    stand_in, tmp_path, capsys
):
    graphs = ["--set", "agent.cuda_graphs=true"]
    gpu_figures.main(["--out", str(tmp_path / "eager"), "--only", "exact"])
    gpu_figures.main(["--out", str(tmp_path / "graphs"), "--only", "uniform", *graphs])
    capsys.readouterr()
    gpu_figures.main(["--table", str(tmp_path / "eager"), str(tmp_path / "graphs")])
    assert "over uniform" not in capsys.readouterr().out
    gpu_figures.main(["--out", str(tmp_path / "graphs"), "--only", "exact", *graphs])
    capsys.readouterr()
    gpu_figures.main(["--table", str(tmp_path / "eager"), str(tmp_path / "graphs")])
    notes = capsys.readouterr().out.split("\n\n")[-1].splitlines()
    assert notes == [
        "device: cuda:0 (stand-in)",
        "prioritized (proportional) over uniform (--set agent.cuda_graphs=true): the replay's "
        "rows take 40 against 40 µs per agent step, +0.0 % of a prioritized step",
    ]


def piece_file(folder: Path, piece: str, rows: dict[str, float], total_us: float) -> None:
    """A piece as a GPU lease saves it, one run with the figures the table reads."""
    figures = {
        "steps_per_second": 1e6 / total_us,
        "steps_per_second_without_test": 1e6 / total_us,
        "ms_per_update": 1.0,
        "us_per_step": {"env": 600.0, "act": 200.0, **rows},
        "total_us_per_step": total_us,
    }
    record = {"device": "cuda:0", "passes": {"nature": figures}}
    folder.mkdir(exist_ok=True)
    (folder / f"{piece}.json").write_text(
        json.dumps({"piece": piece, "set": [], "runs": [{"figures": record}]})
    )


def test_prioritized_over_uniform_compares_the_replays_rows_not_the_runs_totals(tmp_path, capsys):
    """Two processes' totals differ by what else they did (here the uniform run's emulator
    was 40 % slower): the comparison is the replay's own rows, against the prioritized step."""
    piece_file(
        tmp_path,
        "exact",
        {"replay add": 30.0, "learn: replay.sample": 150.0, "learn: update_priorities": 20.0},
        total_us=1250.0,
    )
    piece_file(
        tmp_path,
        "uniform",
        {"replay add": 25.0, "learn: replay.sample": 140.0, "learn: update_priorities": 10.0},
        total_us=1750.0,
    )
    gpu_figures.main(["--table", str(tmp_path)])
    notes = capsys.readouterr().out.split("\n\n")[-1].splitlines()
    assert notes[-1] == (
        "prioritized (proportional) over uniform: the replay's rows take 200 against 175 µs "
        "per agent step, +2.0 % of a prioritized step"
    )


def test_the_figures_folder_under_docs_may_be_committed():
    """The measured pieces live in docs/gpu_figures/, which docs/gpu.md's --table reads."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", "docs/gpu_figures/h100/exact.json"], cwd=ROOT
    )
    assert ignored.returncode == 1  # not ignored


def test_a_piece_past_its_time_limit_is_stopped_and_saves_nothing(stand_in, tmp_path):
    pid_file, child = tmp_path / "child.pid", tmp_path / "child.py"
    child.write_text(
        f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(600)\n"
    )
    stand_in.write_text(
        "import subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, {str(child)!r}])\n"
        "time.sleep(60)\n"
    )
    with pytest.raises(SystemExit) as stopped:
        gpu_figures.main(
            ["--out", str(tmp_path / "out"), "--only", "uniform"] + ["--piece-seconds", "5"]
        )
    assert str(stopped.value) == (
        "error: piece uniform ran past --piece-seconds=5 and was stopped; give fewer --steps "
        "or a smaller --capacity"
    )
    assert list((tmp_path / "out").iterdir()) == []
    # What the piece started was stopped with it (SIGKILL: at once, but seen a moment later).
    pid, deadline = int(pid_file.read_text()), time.monotonic() + 30
    while running(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    survived = running(pid)
    if survived:
        os.kill(pid, signal.SIGKILL)
    assert not survived


def running(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie (dead, waiting to be reaped)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"
