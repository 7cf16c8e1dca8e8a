"""The command line: `python -m reporting DIR [DIR ...]` (the sweep report) unless the first
argument names another command. Every refusal is one line and exit status 2."""

import argparse
import errno
import sys
from pathlib import Path

from artifacts.command_line import OneLineParser, output_directory
from reporting import export, minatar, published, sweep_report

COMMANDS_HELP = """other commands (each has its own --help):
  python -m reporting export RUN_OR_MULTIRUN_DIR [...] --out results
      small publishable files of each run: config, provenance, periodic tests, training returns
  python -m reporting published results --out results/report
      the exported Atari runs beside Dopamine's published DQN and Rainbow curves
  python -m reporting minatar results --out results/minatar_report
      the exported MinAtar runs: prioritized against uniform, beside MinAtar's published DQN
(a multirun directory named `export`, `published` or `minatar`: write it ./export)"""
# command -> its module (whose `build` does it), its directories, its default --out below them
COMMANDS = {
    "": (sweep_report, "Hydra sweep directories, runs or exported runs", "report"),
    "export": (export, "run or multirun directories", None),
    "published": (published, "a directory of exported runs", "report"),
    "minatar": (minatar, "a directory of exported runs", "minatar_report"),
}


def main(argv=None):
    """Runs the command `argv` names; returns what it wrote (report.md, or the exports)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    command = argv[0] if argv and argv[0] in COMMANDS else ""
    module, directories, default_out = COMMANDS[command]
    parser = OneLineParser(
        prog=f"python -m reporting {command}".strip(),
        description=module.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=None if command else COMMANDS_HELP,
    )
    many = module in (sweep_report, export)
    parser.add_argument("directories", type=Path, nargs="+" if many else 1, help=directories)
    default = f"where the report goes (default: the first directory's {default_out}/)"
    out_help = default if default_out else "the results directory"
    parser.add_argument("--out", type=output_directory, required=not default_out, help=out_help)
    args = parser.parse_args(argv[1:] if command else argv)
    for directory in [] if module is export else args.directories:
        if not directory.is_dir():
            parser.error(f"{directory} is not a directory")
    try:
        out = args.out or output_directory(str(args.directories[0] / default_out))
    except argparse.ArgumentTypeError as error:
        parser.error(f"--out (default): {error}")
    try:
        written = module.build(args.directories if many else args.directories[0], out)
    except ValueError as error:
        parser.exit(2, f"error: {error}\n")
    except OSError as error:  # every file is written whole or left as it was
        room = " (no file was left half-written: make room, or give --out on another disk)"
        full = error.errno in (errno.ENOSPC, errno.EDQUOT)
        parser.exit(2, f"error: {error.filename or out}: {error.strerror}{room if full else ''}\n")
    done = f"exported {len(written)} run(s) into {out}" if module is export else f"wrote {written}"
    print(done, file=sys.stderr)
    return written


if __name__ == "__main__":
    main()
