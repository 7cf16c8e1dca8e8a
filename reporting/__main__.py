"""Report over a Hydra multirun directory of train.py runs.

    python -m reporting multirun/2026-01-01_00-00-00 --out reports/sweep

Finds every Atari run (its config.yaml and tensorboard/; runs of other families are listed as
left out), and writes into OUT: report.md (per game and variant statistics over seeds, the
Figure 4 learning-speed summary), one
learning_curves_<game>.png per game (median and interquartile range over seeds, Figure 8)
and learning_speed.png (Figure 4).
"""

import argparse
import sys
from pathlib import Path

from artifacts.command_line import OneLineParser, output_directory
from reporting import export, minatar, published
from reporting.sweep_report import build_report, markdown, plot_all

COMMANDS_HELP = """other commands (each has its own --help):
  python -m reporting export RUN_OR_MULTIRUN_DIR [...] --out results
      small publishable files of each run: config, periodic tests, training returns
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


def sweep_main(argv) -> Path:
    parser = _parser("", __doc__, epilog=COMMANDS_HELP)
    parser.add_argument("multirun_dir", type=Path, help="a Hydra sweep directory (or one run)")
    parser.add_argument(
        "--out",
        type=output_directory,
        default=None,
        help="where the report goes (default: MULTIRUN_DIR/report)",
    )
    args = parser.parse_args(argv)
    if not args.multirun_dir.is_dir():
        parser.error(f"{args.multirun_dir} is not a directory")
    out = args.out or output_directory_or_exit(parser, args.multirun_dir / "report")
    try:
        report = build_report(args.multirun_dir)
    except ValueError as error:
        parser.exit(2, f"error: {error}\n")
    out.mkdir(parents=True, exist_ok=True)
    figures = plot_all(report, out)
    (out / "report.md").write_text(markdown(report, args.multirun_dir, figures))
    print(f"wrote {out / 'report.md'} and {len(figures)} figures", file=sys.stderr)
    return out / "report.md"


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
