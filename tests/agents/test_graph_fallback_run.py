"""A whole training run, in this process on CPU, whose update graph cannot be captured: it
finishes, warns in one line once, and its results are those of the run without graphs.

A learner captures its update only on CUDA, so here the CPU learner's serial updates run its
`captured_update` with graphs on and the capture injected; nothing else of the run changes."""

import re

import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from test_captured_call import FakeCapture

from agents import acceleration
from agents.acceleration import captured_update
from agents.updates import SerialUpdates
from tests.test_train import smoke_run

RUN = ("train.total_steps=200", "train.log_period_steps=50")


def results(run_dir) -> dict:
    """Every scalar but the timings, and the final agent's weights."""
    events = EventAccumulator(str(run_dir / "tensorboard")).Reload()
    scalars = {
        tag: [(event.step, event.value) for event in events.Scalars(tag)]
        for tag in events.Tags()["scalars"]
        if not tag.startswith("speed/")
    }
    return {**scalars, **torch.load(run_dir / "agent_final.pt", weights_only=True)["online"]}


def fail_update_graphs(monkeypatch) -> FakeCapture:
    """From now on every learner captures its update, and every capture raises."""
    capture = FakeCapture("raises")
    serial = SerialUpdates.__init__

    def captured(updates: SerialUpdates, update_step) -> None:
        serial(updates, captured_update(update_step.__self__, True, capture=capture))

    monkeypatch.setattr(acceleration, "GRAPHS_GIVEN_UP", set())
    monkeypatch.setattr(SerialUpdates, "__init__", captured)
    return capture


def test_a_run_whose_graph_fails_warns_once_and_learns_as_the_run_without_graphs(
    tmp_path, capsys, monkeypatch
):
    smoke_run(tmp_path / "eager", *RUN)
    capsys.readouterr()
    capture = fail_update_graphs(monkeypatch)
    smoke_run(tmp_path / "graphs", *RUN)
    assert capture.captures == 1
    assert re.findall(r"warning:.*", capsys.readouterr().err) == [  # among the progress bar's
        "warning: the CUDA graph of the update failed (RuntimeError: operation not permitted "
        "when stream is capturing): continuing without CUDA graphs"
    ]
    eager, graphs = results(tmp_path / "eager"), results(tmp_path / "graphs")
    assert eager.keys() == graphs.keys() and "train/loss" in eager
    for key, value in eager.items():
        assert torch.equal(value, graphs[key]) if torch.is_tensor(value) else value == graphs[key]
