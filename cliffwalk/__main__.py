"""The Blind Cliffwalk experiment of Schaul et al. (2016), Section 3.1 and Appendix B.1.

    python -m cliffwalk --max-n 12 --seeds 10 --out results/cliffwalk
    python -m cliffwalk --replot --out results/cliffwalk     # figures from an existing csv

Writes cliffwalk.csv (one row per run), cliffwalk_summary.md, figure1.png (tabular: uniform,
oracle, greedy TD-error) and figure2.png (linear: uniform, oracle, rank-based, proportional).
"""

import argparse
import sys
import time
from pathlib import Path

from artifacts.command_line import OneLineParser, at_least, output_directory
from cliffwalk.experiment import (
    DEFAULT_VARIANTS,
    FIGURE_VARIANTS,
    parse_variant,
    read_results,
    run_grid,
    summarize,
    write_results,
)
from cliffwalk.plots import markdown_table, plot_figure
from cliffwalk.strategies import ReplaySettings

TITLES = {
    "figure1": "Blind Cliffwalk, tabular (Fig. 1 and Fig. 2 left)",
    "figure2": "Blind Cliffwalk, linear FA (Fig. 2 right)",
}


def parse_args(argv=None) -> argparse.Namespace:
    parser = OneLineParser(prog="python -m cliffwalk", description=__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--min-n", type=at_least(2), default=2, help="smallest number of states")
    parser.add_argument("--max-n", type=at_least(2), default=12, help="largest number of states")
    parser.add_argument("--seeds", type=at_least(1), default=10, help="runs per variant and n")
    parser.add_argument("--out", type=output_directory, default=Path("results/cliffwalk"))
    parser.add_argument("--jobs", type=at_least(1), default=2, help="parallel worker processes")
    parser.add_argument("--variants", nargs="+", default=list(DEFAULT_VARIANTS),
                        help="REPRESENTATION/STRATEGY, e.g. linear/proportional")
    parser.add_argument("--max-updates", type=at_least(1.0, float), default=1e7,
                        help="cap per run; capped runs are reported as such")
    parser.add_argument("--proportional-exponent", type=at_least(0.0, float), default=0.6,
                        help="α")
    parser.add_argument("--rank-exponent", type=at_least(0.0, float), default=0.7, help="α")
    parser.add_argument("--priority-epsilon", type=at_least(0.0, float, strict=True),
                        default=0.01, help="ε")
    parser.add_argument("--rank-segments", type=at_least(1), default=32,
                        help="k equal-probability segments of the rank-based sampler")
    parser.add_argument("--replot", action="store_true",
                        help="only redraw figures and summary from OUT/cliffwalk.csv")
    args = parser.parse_args(argv)
    if args.max_n < args.min_n:
        parser.error(f"--max-n {args.max_n} is not allowed: must be >= --min-n ({args.min_n})")
    return args


def settings_from(args: argparse.Namespace) -> ReplaySettings:
    return ReplaySettings(
        max_updates=int(args.max_updates),
        proportional_exponent=args.proportional_exponent,
        rank_exponent=args.rank_exponent,
        priority_epsilon=args.priority_epsilon,
        rank_segments=args.rank_segments,
    )


def report(results, out: Path) -> str:
    """Writes the figures and the summary markdown; returns the markdown."""
    summaries = summarize(results)
    sections = []
    for name, (representation, strategies) in FIGURE_VARIANTS.items():
        plot_figure(summaries, representation, strategies, TITLES[name], out / f"{name}.png")
        table = markdown_table(summaries, representation, strategies)
        sections.append(f"### {TITLES[name]}\n\nmedian [min–max] updates until MSE < 10⁻³\n\n"
                        f"{table}\n")
    text = "\n".join(sections)
    (out / "cliffwalk_summary.md").write_text(text)
    return text


def main(argv=None) -> None:
    args = parse_args(argv)
    for variant in args.variants:
        parse_variant(variant)  # fail before any output is written
    args.out.mkdir(parents=True, exist_ok=True)
    csv_path = args.out / "cliffwalk.csv"
    if args.replot:
        results = read_results(csv_path)
    else:
        start = time.perf_counter()
        results = run_grid(args.variants, range(args.min_n, args.max_n + 1),
                           range(args.seeds), settings_from(args), jobs=args.jobs)
        write_results(results, csv_path)
        print(f"{len(results)} runs in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    print(report(results, args.out))
    print(f"wrote {csv_path}, figure1.png, figure2.png, cliffwalk_summary.md in {args.out}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
