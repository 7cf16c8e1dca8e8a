"""Report over a Hydra multirun directory of train.py runs.

    python -m reporting multirun/2026-01-01_00-00-00 --out reports/sweep

Finds every run (its config.yaml and tensorboard/), and writes into OUT: report.md (per game
and variant statistics over seeds, the Figure 4 learning-speed summary), one
learning_curves_<game>.png per game (median and interquartile range over seeds, Figure 8)
and learning_speed.png (Figure 4).
"""

import argparse
import sys
from pathlib import Path

from reporting.plots import plot_all
from reporting.report import build_report, markdown


def main(argv=None) -> Path:
    parser = argparse.ArgumentParser(prog="python -m reporting", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("multirun_dir", type=Path, help="a Hydra sweep directory (or one run)")
    parser.add_argument("--out", type=Path, default=None,
                        help="where the report goes (default: MULTIRUN_DIR/report)")
    args = parser.parse_args(argv)
    if not args.multirun_dir.is_dir():
        parser.error(f"{args.multirun_dir} is not a directory")
    out = args.out or args.multirun_dir / "report"
    try:
        report = build_report(args.multirun_dir)
    except ValueError as error:
        parser.exit(2, f"error: {error}\n")
    out.mkdir(parents=True, exist_ok=True)
    figures = plot_all(report, out)
    (out / "report.md").write_text(markdown(report, args.multirun_dir, figures))
    print(f"wrote {out / 'report.md'} and {len(figures)} figures", file=sys.stderr)
    return out / "report.md"


if __name__ == "__main__":
    main()
