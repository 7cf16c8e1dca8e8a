"""evaluate.py's command line: its settings are one schema (`evaluation.settings`), and a value
means what it means on train.py's command line (Hydra's override grammar)."""

import json

import pytest

import evaluate
from evaluation.settings import EvaluateSettings
from tests.evaluation.test_evaluate_cli import QUICK, make_run


def test_values_are_read_as_train_py_reads_them(tmp_path):
    path, options = evaluate.read_command_line(
        [str(tmp_path), "epsilon=1e-3", "episodes=1_000", "cuda_graphs=true", "device=cuda:1"]
        + ["start_states=null", "env.max_episode_frames=400", "output='a b'"]
    )
    assert path == tmp_path
    assert options == {
        **EvaluateSettings.defaults(),
        "epsilon": 0.001,
        "episodes": 1000,
        "cuda_graphs": True,
        "device": "cuda:1",
        "output": "a b",
        "env": {"max_episode_frames": 400},
    }


def test_an_epsilon_in_exponent_notation_is_evaluated_with(tmp_path):
    run = make_run(tmp_path / "run", 0)
    arguments = [str(run), "epsilon=1e-3", "episodes=1", f"output={tmp_path}", *QUICK]
    assert evaluate.main(arguments) == 0
    assert json.loads((tmp_path / "evaluation_noop.json").read_text())["epsilon"] == 0.001


@pytest.mark.parametrize(
    ("argument", "message"),
    [
        ("episodes=1,2", "episodes=1,2 is not allowed: must be a single value"),
        ("env.noop_max=[1,2]", "env.noop_max=[1,2] is not allowed: must be a single value"),
        ("seed='1", "seed='1 is not a key=value argument: "),
        ("seed=1.5", "seed=1.5 is not allowed: must be an integer >= 0"),
        ("cuda_graphs=yes", "cuda_graphs=yes is not allowed: must be true or false"),
    ],
)
def test_a_value_that_is_no_single_setting_is_one_line(tmp_path, capsys, argument, message):
    assert evaluate.main([str(tmp_path), argument]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"error: {message}") and error.count("\n") == 1


def test_the_help_lists_every_setting():
    for name in EvaluateSettings.defaults():
        assert f"\n    {name}=" in evaluate.__doc__
