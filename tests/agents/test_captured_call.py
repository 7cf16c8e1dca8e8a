"""CUDA graphs that give way to the eager call, tested on CPU by injecting the capture: a
capture that raises, or a first replay that disagrees with the eager call, leaves the learner
eager with one line of warning naming the cause and exactly the eager learner's parameters,
and every later call of its kind in the process eager without a second try or warning; a
graph that checks out is replayed, and captured anew (after a new warm-up) when its inputs,
its baked-in constants or the optimizer's state tensors change."""

import numpy as np
import pytest
import torch
from test_double_dqn import make_agent, random_batch

from agents import acceleration
from agents.acceleration import CapturedCall, PinnedStaging, captured_update

BATCHES = [random_batch(seed=seed) for seed in range(8)]


@pytest.fixture(autouse=True)
def no_graph_given_up_yet(monkeypatch):
    """Each test starts as a fresh process would, and leaves the record as it found it."""
    monkeypatch.setattr(acceleration, "GRAPHS_GIVEN_UP", set())


class FakeCapture:
    """Stands in for `capture_cuda_graph` on CPU. `kind`: "raises" (as a capture that hits an
    operation CUDA graphs forbid: ending the capture then raises too, with only "a previous
    error"), "faithful" (the replay is the call itself, as a good graph computes it) or "lossy"
    (the replay's update moves the first parameter 0.01 too far)."""

    def __init__(self, kind: str):
        self.kind, self.captures, self.replays = kind, 0, 0

    def __call__(self, function, inputs, stream):
        self.captures += 1
        assert stream is None  # no CUDA stream on a CPU device
        if self.kind == "raises":
            try:
                raise RuntimeError("operation not permitted when stream is capturing\nsecond line")
            finally:
                raise RuntimeError("operation failed due to a previous error during capture")

        def replay():
            self.replays += 1
            outputs = function(*inputs)
            if self.kind == "lossy":
                with torch.no_grad():
                    next(function.__self__.online.parameters()).add_(0.01)
            return outputs

        return replay


class CapturedLearner:
    """A CPU learner whose updates go through its CapturedCall with graphs on and a fake
    capture, from fixed input tensors (as on CUDA, where staging keeps them in place)."""

    def __init__(self, kind: str, seed: int = 1):
        self.agent, self.capture = make_agent(seed=seed), FakeCapture(kind)
        self.update = captured_update(self.agent, enabled=True, capture=self.capture)
        self.staging = PinnedStaging(torch.device("cpu"), pin_memory=False)

    def learn(self, batch) -> np.ndarray:
        arrays = (batch.all_states, batch.actions, batch.rewards, batch.terminals, batch.weights)
        return self.update(*self.staging.to_device(arrays)).numpy().copy()


def assert_same_learner(first, second) -> None:
    for a, b in zip(first.online.parameters(), second.online.parameters(), strict=True):
        assert torch.equal(a, b)
    for a, b in zip(first.optimizer.state.values(), second.optimizer.state.values(), strict=True):
        assert all(torch.equal(a[key], b[key]) for key in ("grad_avg", "square_avg"))


def learn_all(captured: CapturedLearner, twin) -> None:
    """Every batch through both; the summaries (TD errors, loss, mean Q) bit for bit."""
    for batch in BATCHES:
        summary, expected = captured.learn(batch), twin.learn(batch)
        np.testing.assert_array_equal(summary[: len(batch.actions)], expected.td_errors)
        assert summary[len(batch.actions)] == expected.loss


def test_a_capture_that_raises_leaves_the_update_eager_with_one_line_naming_the_cause(capsys):
    captured, twin = CapturedLearner("raises"), make_agent(seed=1)
    learn_all(captured, twin)
    assert_same_learner(captured.agent, twin)
    assert captured.capture.captures == 1  # after the 3 warm-ups; never tried again
    assert capsys.readouterr().err == (
        "warning: the CUDA graph of the update failed (RuntimeError: operation not permitted "
        "when stream is capturing): continuing without CUDA graphs\n"
    )
    assert not captured.update.enabled


@pytest.mark.parametrize("kind", ["raises", "lossy"])
def test_once_a_graph_gave_up_its_kind_stays_eager_in_the_process_without_a_second_warning(
    kind, capsys
):
    """As the evaluation worker builds a policy for every test: the next learner's update
    neither captures nor warns, and learns as the eager one; other kinds still capture."""
    first = CapturedLearner(kind)
    learn_all(first, make_agent(seed=1))
    later, twin = CapturedLearner(kind, seed=2), make_agent(seed=2)
    learn_all(later, twin)
    assert_same_learner(later.agent, twin)
    assert (later.capture.captures, later.capture.replays) == (0, 0)
    assert len(capsys.readouterr().err.splitlines()) == 1
    capture = FakeCapture("faithful")
    doubled = CapturedCall(torch.mul, name="doubling", enabled=True, warmup=0, capture=capture)
    assert doubled(torch.tensor([1.0]), torch.tensor(2.0)).tolist() == [2.0]
    assert capture.captures == 1 and doubled.enabled


def test_a_first_replay_that_disagrees_turns_graphs_off_and_keeps_the_eager_update(capsys):
    captured, twin = CapturedLearner("lossy"), make_agent(seed=1)
    learn_all(captured, twin)
    assert_same_learner(captured.agent, twin)  # the lossy replay's parameters were put back
    assert (captured.capture.captures, captured.capture.replays) == (1, 1)
    assert capsys.readouterr().err == (
        "warning: the CUDA graph of the update failed (its first replay differs from the eager "
        "call by up to 0.01): continuing without CUDA graphs\n"
    )


def test_a_graph_that_checks_out_is_replayed_and_updates_as_the_eager_learner(capsys):
    captured, twin = CapturedLearner("faithful"), make_agent(seed=1)
    learn_all(captured, twin)
    assert_same_learner(captured.agent, twin)
    # 3 warm-ups, the capture with its checking replay, then a replay per update.
    assert (captured.capture.captures, captured.capture.replays) == (1, 1 + len(BATCHES) - 4)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    "change",
    [
        lambda agent: agent.optimizer.param_groups[0].update(lr=1e-3),
        lambda agent: agent.optimizer.param_groups[0].update(epsilon=1e-4),
        lambda agent: setattr(agent, "discount", 0.5),
        lambda agent: setattr(agent, "td_error_clip", 2.0),
    ],
)
def test_a_changed_constant_is_captured_anew_after_a_new_warm_up(change):
    """A graph bakes in the Python numbers it read: replaying it after a change would ignore
    the change silently."""
    captured, twin = CapturedLearner("faithful"), make_agent(seed=1)
    learn_all(captured, twin)
    change(captured.agent)
    change(twin)
    learn_all(captured, twin)
    assert_same_learner(captured.agent, twin)
    assert captured.capture.captures == 2
    assert captured.capture.replays == 2 * (1 + len(BATCHES) - 4)


def test_reset_warms_up_again_before_it_captures():
    """After `reset` (the learner's on loading a state dict: new optimizer state tensors) the
    next capture comes after a new warm-up, as capture requires."""
    capture = FakeCapture("faithful")
    doubled = CapturedCall(torch.mul, name="doubling", enabled=True, warmup=2, capture=capture)
    values, two = torch.tensor([1.0, 2.0]), torch.tensor(2.0)
    for _ in range(4):  # 2 warm-ups, the capture and its check, a replay
        assert doubled(values, two).tolist() == [2.0, 4.0]
    assert (capture.captures, capture.replays) == (1, 2)
    doubled.reset()
    doubled(values, two)
    doubled(values, two)
    assert (capture.captures, capture.replays) == (1, 2)
    doubled(values, two)
    assert (capture.captures, capture.replays) == (2, 3)


def test_other_input_tensors_are_captured_anew_and_a_disabled_call_is_plain():
    capture = FakeCapture("faithful")
    doubled = CapturedCall(torch.mul, name="doubling", enabled=True, warmup=1, capture=capture)
    two = torch.tensor(2.0)
    first, second = torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0])
    assert [doubled(first, two).tolist() for _ in range(3)] == [[2.0, 4.0]] * 3
    assert (capture.captures, capture.replays) == (1, 2)
    assert doubled(second, two).tolist() == [6.0, 8.0]  # a warm-up call again
    assert doubled(second, two).tolist() == [6.0, 8.0]
    assert capture.captures == 2
    plain = CapturedCall(torch.mul, name="doubling", enabled=False, capture=capture)
    assert plain(first, two).tolist() == [2.0, 4.0] and capture.captures == 2
