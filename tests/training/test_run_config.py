"""A run's stored config, read back: settings added since it was written get the values that
continue the run as it ran."""

from omegaconf import OmegaConf

from training.run_config import load_stored_config


def test_a_config_from_before_later_settings_is_completed_as_it_ran(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("seed: 0\nenv:\n  game: Breakout\ntrain:\n  total_steps: 10\n")
    stored = load_stored_config(path)
    assert OmegaConf.to_container(stored) == {
        "seed": 0,
        "env": {"game": "breakout", "kind": "atari"},
        "train": {"total_steps": 10, "life_loss": "stop_bootstrap"},
        "threads": "auto",
        "agent": {
            "pipelined": False,
            "cuda_graphs": True,
            "network": "nature",
            "target_rule": "double_dqn",
            "optimizer": "deepmind_rmsprop",
        },
        "evaluation": {"worker": False},
        "replay": {"importance_exponent_final_step": None},
    }


def test_settings_a_run_stored_are_kept(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(
        "threads: 2\nenv:\n  game: pong\n  kind: lean_atari\ntrain:\n  life_loss: new_episode\n"
    )
    assert OmegaConf.to_container(load_stored_config(path)) == {
        "threads": 2,
        "env": {"game": "pong", "kind": "lean_atari"},
        "train": {"life_loss": "new_episode"},
        "agent": {
            "pipelined": False,
            "cuda_graphs": True,
            "network": "nature",
            "target_rule": "double_dqn",
            "optimizer": "deepmind_rmsprop",
        },
        "evaluation": {"worker": False},
        "replay": {"importance_exponent_final_step": None},
    }
