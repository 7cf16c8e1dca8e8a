"""Report over Hydra multirun directories of train.py runs.

    python -m reporting multirun/2026-01-01_00-00-00 --out reports/sweep
    python -m reporting multirun/alpha results/minatar/seaquest/dqn-proportional --out reports/alpha

Finds every run below the directories (its config.yaml and tensorboard/, or an exported run's
CSV files), and reports them together, one row per game and setting: the variant and the
values of the keys varied between its runs, so that only seeds are pooled as seeds. Atari runs:
OUT/report.md (per game and setting the statistics over seeds, the Figure 4 learning-speed
summary), one learning_curves_<game>.png per game (median and interquartile range over seeds,
Figure 8) and learning_speed.png (Figure 4). MinAtar runs: the MinAtar report (`python -m
reporting minatar`), into OUT/minatar/ beside Atari runs, else into OUT.
"""

import argparse
import dataclasses
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from artifacts.command_line import OneLineParser, output_directory
from reporting import export, minatar, published
from reporting.minatar_results import FAMILY as MINATAR
from reporting.results import ATARI_FAMILY, read_results
from reporting.sweep_report import build_report, markdown, plot_all

COMMANDS_HELP = """other commands (each has its own --help):
  python -m reporting export RUN_OR_MULTIRUN_DIR [...] --out results
      small publishable files of each run: config, provenance, periodic tests, training returns
  python -m reporting published results --out results/report
      the exported Atari runs beside Dopamine's published DQN and Rainbow curves
  python -m reporting minatar results --out results/minatar_report
      the exported MinAtar runs: prioritized against uniform, beside MinAtar's published DQN
(a multirun directory named `export`, `published` or `minatar`: write it ./export)"""


def _parser(command: str, doc: str, **kwargs) -> argparse.ArgumentParser:
    return OneLineParser(
        prog=f"python -m reporting{command}",
        description=doc,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        **kwargs,
    )


def minatar_beside_atari(scratch: Path, out: Path, shown_as: str, source, others) -> str:
    """The MinAtar report of a sweep that has Atari runs too, into OUT/minatar/; a note on it
    for the Atari report."""
    count = others[MINATAR]
    try:
        minatar.build(scratch, out / MINATAR, shown_as, source, name_others=False)
    except ValueError:
        return f"{count} {MINATAR} run(s) left out: none has a training episode to report"
    return f"{count} {MINATAR} run(s): not Atari, reported in {MINATAR}/report.md"


def write_sweep_report(directories: Sequence[Path], out: Path) -> Path:
    """The sweep report over the runs below `directories` into `out` (see the module's
    docstring); returns its report.md. Its refusals are one-line ValueErrors."""
    shown_as = ", ".join(f"`{directory}`" for directory in directories)
    with tempfile.TemporaryDirectory(prefix="sweep_export_") as scratch:
        sources = export.export_scratch(directories, Path(scratch))

        def source(info) -> Path:  # a run's own directory, for the notes
            return sources.get(info.path, info.path)

        atari, others = read_results(Path(scratch), ATARI_FAMILY)
        if not atari and MINATAR in others:
            return minatar.build(Path(scratch), out, shown_as, source)
        if not atari:
            raise ValueError(f"{shown_as}: no Atari or MinAtar run to report")
        report = build_report(atari, source)
        notes = [
            f"{count} {family} run(s) left out: no report for them"
            for family, count in others.items()
            if family != MINATAR
        ]
        if MINATAR in others:
            notes.append(minatar_beside_atari(Path(scratch), out, shown_as, source, others))
    report = dataclasses.replace(report, notes=report.notes + notes)
    out.mkdir(parents=True, exist_ok=True)
    figures = plot_all(report, out)
    (out / "report.md").write_text(markdown(report, shown_as, figures))
    return out / "report.md"


def sweep_main(argv) -> Path:
    parser = _parser("", __doc__, epilog=COMMANDS_HELP)
    parser.add_argument(
        "directories",
        type=Path,
        nargs="+",
        help="Hydra sweep directories, runs or exported runs, reported together",
    )
    parser.add_argument(
        "--out",
        type=output_directory,
        default=None,
        help="where the report goes (default: the first directory's report/)",
    )
    args = parser.parse_args(argv)
    for directory in args.directories:
        if not directory.is_dir():
            parser.error(f"{directory} is not a directory")
    out = args.out or output_directory_or_exit(parser, args.directories[0] / "report")
    try:
        path = write_sweep_report(args.directories, out)
    except ValueError as error:
        parser.exit(2, f"error: {error}\n")
    print(f"wrote {path}", file=sys.stderr)
    return path


def export_main(argv) -> list[Path]:
    parser = _parser(" export", export.__doc__)
    parser.add_argument("runs", type=Path, nargs="+", help="run or multirun directories")
    parser.add_argument("--out", type=output_directory, required=True, help="the results directory")
    args = parser.parse_args(argv)
    try:
        written, notes = export.export_runs(args.runs, args.out)
    except (ValueError, OSError) as error:
        parser.exit(2, f"error: {error}\n")
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    print(f"exported {len(written)} run(s) into {args.out}", file=sys.stderr)
    return written


def results_report_main(command: str, module, default_out: str, argv) -> Path:
    """A report over a directory of exported runs: `module.build(RESULTS_DIR, OUT)`, its
    refusals one line with exit status 2."""
    parser = _parser(f" {command}", module.__doc__)
    parser.add_argument("results_dir", type=Path, help="a directory of exported runs")
    parser.add_argument(
        "--out",
        type=output_directory,
        default=None,
        help=f"where the report goes (default: RESULTS_DIR/{default_out})",
    )
    args = parser.parse_args(argv)
    out = args.out or output_directory_or_exit(parser, args.results_dir / default_out)
    try:
        path = module.build(args.results_dir, out)
    except (ValueError, OSError) as error:
        parser.exit(2, f"error: {error}\n")
    print(f"wrote {path}", file=sys.stderr)
    return path


def published_main(argv) -> Path:
    return results_report_main("published", published, "report", argv)


def minatar_main(argv) -> Path:
    return results_report_main("minatar", minatar, "minatar_report", argv)


def output_directory_or_exit(parser: argparse.ArgumentParser, path: Path) -> Path:
    """A default output directory, checked like one given with --out."""
    try:
        return output_directory(str(path))
    except argparse.ArgumentTypeError as error:
        parser.error(f"--out (default): {error}")


COMMANDS = {"export": export_main, "published": published_main, "minatar": minatar_main}


def main(argv=None):
    """The sweep report, unless the first argument names another command."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in COMMANDS:
        return COMMANDS[argv[0]](argv[1:])
    return sweep_main(argv)


if __name__ == "__main__":
    main()
