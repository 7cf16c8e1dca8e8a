"""What a run leaves on disk: the run directory's file names, atomic writes, the format/version
header of every file read back, and agent snapshots. It imports no package that writes or reads
these files (training, evaluation, reporting), so each of them can import it."""
