"""Reports over train.py runs (`python -m reporting --help`): the sweep report, `export` (the
publishable files of runs), `published` (Atari runs beside Dopamine's curves) and `minatar`
(MinAtar runs beside MinAtar's published DQN); and evaluate.py's score table (`score_table`).
`export` is the one reader of runs' TensorBoard events, `results` the one reader of exported
runs (of any family), and `report` the one builder every report kind writes with."""
