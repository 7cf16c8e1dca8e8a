"""Human start points for the human-starts protocol: from play to a verified start-state file.

- `trajectories.py`: the trajectory file format (play as action logs), and the emulator that
  replays a log exactly;
- `start_state_file.py`: the start-state file format, its checks, and entering a start point;
- `verification.py`: every start point is what its actions reach, and restores faithfully;
- `sampling.py`: start points drawn uniformly over a trajectory file's frames, captured by replay;
- `recording.py`: play as a trajectory file, from the keyboard or from an agent's games;
- `__main__.py`: the commands, ``python -m evaluation.human_starts`` (record, play, sample,
  verify, show).

Each module imports only modules listed above it. Nothing is imported here: the evaluator
needs the file format and the verification, not the recording tools.
"""
