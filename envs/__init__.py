"""Atari environments, the acting-side frame stack and the games' ids (their reference scores
are in `evaluation.scores`)."""

from envs.atari import make_env
from envs.frame_stack import FrameStack
from envs.games import Game, all_games, resolve_game

__all__ = ["FrameStack", "Game", "all_games", "make_env", "resolve_game"]
