"""Does a restored ALE state continue exactly like the emulator that saved it?

    python benchmarks/restore_fidelity.py [--games pong,qbert | --all] [--depths 0,1,100,600]

Emulator A (the sampler's replay env) plays a seeded reset and `depth` frames of seeded random
minimal actions, each held 4 frames; it saves its states at frames depth - 1 and depth, then
plays `--horizon` more frames, the truth. A fresh emulator B made like the evaluator's env
(`make_env(noop_max=0)`, another seed, `reset()`) enters frame `depth` by each of PROCEDURES
(docs/evaluation.md) and plays the same frames; a cell is the first frame where B's RAM / screen
differ ('-': never). `over`: A's game had ended (ALE emulates nothing then).
"""

import time

import ale_py
import numpy as np
from common import command_line, markdown, row

from envs.atari import make_env
from envs.games import all_games, resolve_game
from evaluation.human_starts.trajectories import replay_env

DEFAULT_GAMES = "pong,breakout,ms_pacman,qbert,road_runner,seaquest,space_invaders"
PROCEDURES = ("fresh", "primed", "lead-in", "lead-in+rng")
HOLD = 4  # frames an action is held, like an agent's frame skip


def actions(minimal: list[int], frames: int, seed: int) -> np.ndarray:
    """``frames`` per-frame ALE action ids: seeded random minimal actions held HOLD frames."""
    picks = np.random.default_rng(seed).choice(minimal, -(-frames // HOLD))
    return np.repeat(picks, HOLD)[:frames]


def play(ale, stream) -> tuple[np.ndarray, np.ndarray]:
    """RAM (frames, 128) and palette screens (frames, 210, 160) after each frame of ``stream``."""
    rams, screens = [], []
    for action in stream:
        ale.act(int(action))
        rams.append(ale.getRAM().copy())
        screens.append(ale.getScreen().copy())
    return np.array(rams), np.array(screens)


def first_difference(mine: np.ndarray, truth: np.ndarray) -> str:
    """The first frame (1-based) where the per-frame arrays differ, or '-'."""
    differs = (mine != truth).reshape(len(truth), -1).any(axis=1)
    return str(int(np.argmax(differs)) + 1) if differs.any() else "-"


def restored(game: str, states: dict, procedure: str, depth: int, last: int, seed: int):
    """A fresh evaluator-style emulator brought to frame ``depth`` by ``procedure``."""
    env = make_env(game, seed=seed, noop_max=0)
    env.reset()
    ale = env.unwrapped.ale
    lead_in = procedure.startswith("lead-in") and depth > 0
    saved_at = depth - 1 if lead_in else depth
    if procedure != "fresh" and saved_at > 0:
        ale.act(0)
    kind = "rng" if procedure.endswith("rng") else "plain"
    ale.restoreState(ale_py.ALEState(states[kind, saved_at]))
    if lead_in:
        ale.act(last)
    return env


def probe(game: str, depth: int, horizon: int, seed: int) -> dict[str, str]:
    """One table row: per procedure, 'first RAM difference / first screen difference'."""
    env = replay_env(game)
    env.reset(seed=seed)
    ale = env.unwrapped.ale
    minimal = [a.value for a in ale.getMinimalActionSet()]
    prefix = actions(minimal, depth, seed + 1)
    for action in prefix[:-2]:
        ale.act(int(action))
    states = {}  # (kind, frame) -> bytes, for frames depth - 1 and depth
    for frame in range(max(depth - 1, 0), depth + 1):
        if frame > 0:
            ale.act(int(prefix[frame - 1]))
        states["plain", frame] = ale.cloneState().serialize()
        states["rng", frame] = ale.cloneState(include_rng=True).serialize()
    cells = {"over": "over" if ale.game_over() else ""}
    if ale.cloneSystemState().serialize() != states["rng", depth]:
        cells["over"] += " system-state differs from include_rng"
    stream = actions(minimal, horizon, seed + 2)
    truth = play(ale, stream)
    env.close()
    last = int(prefix[-1]) if depth else 0
    for procedure in PROCEDURES:
        copy = restored(game, states, procedure, depth, last, seed + 3)
        played = play(copy.unwrapped.ale, stream)  # RAM and screens, as the truth's
        copy.close()
        cells[procedure] = " / ".join(map(first_difference, played, truth))
    return cells


def main() -> None:
    parser = command_line(__doc__)
    parser.add_argument("--games", default=DEFAULT_GAMES, help="comma-separated game names")
    parser.add_argument("--all", action="store_true", help="all 57 games of the paper")
    parser.add_argument("--depths", default="0,1,100,600,1800", help="start depths in frames")
    parser.add_argument("--horizon", type=int, default=2000, help="frames compared")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    names = [game.rom_id for game in all_games()] if args.all else args.games.split(",")
    games = [resolve_game(name).rom_id for name in names]
    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
    print(f"ale-py {ale_py.__version__}, horizon {args.horizon} frames, seed {args.seed}")
    print(markdown(["game", "depth", *PROCEDURES, "note"], []))
    unfaithful, started = {p: set() for p in PROCEDURES}, time.process_time()
    for game in games:
        for depth in map(int, args.depths.split(",")):
            cells = probe(game, depth, args.horizon, args.seed)
            print(row([game, str(depth), *(cells[p] for p in PROCEDURES), cells["over"]]))
            for procedure in PROCEDURES:
                if cells[procedure] != "- / -" and not cells["over"]:
                    unfaithful[procedure].add(game)
    for procedure, found in unfaithful.items():
        print(f"{procedure}: {len(found)} of {len(games)} diverge: {', '.join(sorted(found))}")
    print(f"CPU time {time.process_time() - started:.0f} s")


if __name__ == "__main__":
    main()
