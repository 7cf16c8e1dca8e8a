"""evaluate.py acts through the policy rebuilt from each snapshot, with CUDA graphs only when
`cuda_graphs=true` asks for them; any other value is refused in one line."""

from pathlib import Path

import pytest
from test_evaluate_cli import QUICK, make_run

import evaluate
from artifacts.snapshot import load_agent_snapshot


@pytest.mark.parametrize(("arguments", "graphs"), [([], False), (["cuda_graphs=true"], True)])
def test_evaluate_builds_the_policy_with_cuda_graphs_only_when_asked(
    arguments, graphs, tmp_path, monkeypatch
):
    run, loaded = make_run(tmp_path / "run", seed=0), []

    def recording_load(path, device, cuda_graphs):
        loaded.append((Path(path).name, device, cuda_graphs))
        return load_agent_snapshot(path, device, cuda_graphs)

    monkeypatch.setattr(evaluate, "load_agent_snapshot", recording_load)
    assert evaluate.main([str(run), "episodes=1", *QUICK, *arguments]) == 0
    assert loaded == [("agent_best.pt", "cpu", graphs)]


def test_a_cuda_graphs_value_that_is_not_a_boolean_is_refused(tmp_path, capsys):
    run = make_run(tmp_path / "run", seed=0)
    assert evaluate.main([str(run), "cuda_graphs=maybe", *QUICK]) == 2
    assert capsys.readouterr().err == (
        "error: cuda_graphs=maybe is not allowed: must be true or false\n"
    )
