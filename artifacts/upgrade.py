"""What older versions of this code wrote, read as this version writes it: a run's config.yaml
(its settings), a checkpoint's state and an agent snapshot are each upgraded once, where they
are read, so that no other module knows about older versions.

Every value filled in here is the one an older run ran with, not a default: it stays what it
is whatever later versions make the default. Runs that store the evaluation and checkpoint
settings (all since an early revision of version 0.1.0) are upgraded; an older config lacks
settings this module cannot add, and `check_resumable` refuses to resume it in one line
naming what it lacks."""

from __future__ import annotations

import copy
import os

from envs.registry import environment_kind

# Settings added since runs first stored their evaluation settings, with the value that
# continues a run stored without them the way it ran.
ADDED_SETTINGS = {
    "threads": "auto",
    "env.kind": "atari",
    "train.life_loss": "stop_bootstrap",  # a lost life only stopped bootstrapping
    "agent.pipelined": False,
    "agent.cuda_graphs": True,
    "agent.torch_compile": False,
    "agent.network": "nature",
    "agent.target_rule": "double_dqn",
    "agent.optimizer": "deepmind_rmsprop",
    "agent.keep_maximum_step": False,
    "evaluation.worker": False,  # the periodic test ran inline
    "replay.priority_signal": "td_error",
    "replay.priority_epsilon": 0.01,
    "replay.eviction": "fifo",
    "replay.device": "cpu",
    "replay.importance_exponent_final_step": None,
}


def upgrade_config(config: dict) -> dict:
    """A run's config (config.yaml as plain data) as this version writes it: the settings added
    since, and its game by the id it is stored by now. A copy."""
    config = copy.deepcopy(config)
    for key, value in ADDED_SETTINGS.items():
        section, _, name = key.rpartition(".")
        values = config.setdefault(section, {}) if section else config
        values.setdefault(name, value)
    replay, train = config.get("replay"), config.get("train")
    if isinstance(replay, dict) and "priority_exponent" in replay and isinstance(train, dict):
        # An annealed α changed once per log period before it had a period of its own.
        replay.setdefault("priority_exponent_period_steps", train.get("log_period_steps"))
    env = config.get("env")
    if isinstance(env, dict) and isinstance(env.get("game"), str):
        # Games were stored by the name given before they were stored by their id.
        env["game"] = environment_kind(env["kind"]).game_id(env["game"])
    return config


def check_resumable(config: dict) -> None:
    """A run config (`upgrade_config`'s) that this version can resume, or a one-line
    ValueError: one written by an early revision of version 0.1.0 has no evaluation settings,
    and their values then were not recorded."""
    evaluation = config.get("evaluation")
    if not (isinstance(evaluation, dict) and "every_frames" in evaluation):
        raise ValueError(
            f"resume={config.get('resume')}: the run was written by a version too old to "
            "resume (an early 0.1.0: its config.yaml has no evaluation.every_frames); runs "
            "that record their evaluation settings can be resumed"
        )


def upgrade_checkpoint_state(state: dict, identity: dict) -> dict:
    """A checkpoint's state (`training.run_state.capture_run_state`'s) as this version writes
    it; `identity` is the resuming run's (`run_identity`), which a checkpoint from before
    identities were recorded is taken to have (it cannot be checked). The same dict."""
    if state.get("identity") is None:
        state["identity"] = dict(identity)
    recorded = state["identity"]
    recorded["env.kind"] = recorded.get("env.kind") or ADDED_SETTINGS["env.kind"]
    recorded["replay.eviction"] = (
        recorded.get("replay.eviction") or ADDED_SETTINGS["replay.eviction"]
    )
    if state.get("torch_threads") is None:
        state["torch_threads"] = _threads_auto_ran_with()
    if "pending_test_steps" not in state:  # one test at most was pending, inline
        pending = state.pop("pending_test_step", None)
        state["pending_test_steps"] = [] if pending is None else [pending]
    state.setdefault("learning", None)  # no update was ever in flight
    state.setdefault("next_action", None)  # every action was chosen at its own step
    # No configuration recorded (it cannot be checked), and no change recorded since the start.
    state.setdefault("config", None)
    state.setdefault("changes", [])
    if state["config"] is not None:
        state["config"] = upgrade_config(state["config"])
    # Nothing was ever added between a draw and its priority update.
    state["replay"].setdefault("added_before_sample", None)
    return state


def _threads_auto_ran_with() -> int:
    """`threads: auto` before checkpoints recorded the count: OMP_NUM_THREADS where set, else
    half the cores (at most 8)."""
    omp = os.environ.get("OMP_NUM_THREADS", "")
    return max(1, int(omp)) if omp.isdigit() else max(1, min(8, len(os.sched_getaffinity(0)) // 2))


def upgrade_snapshot(payload: dict) -> dict:
    """An agent snapshot's payload as this version writes it: one from before the network and
    frames were recorded holds the Nature network on 84x84 frames. The same dict."""
    payload.setdefault("network", "nature")
    payload.setdefault("frame_shape", [84, 84])
    return payload
