"""The Blind Cliffwalk experiment of Schaul et al. (2016), Section 3.1 and Appendix B.1.

    python -m cliffwalk --max-n 12 --seeds 10 --out results/cliffwalk
    python -m cliffwalk --replot --out results/cliffwalk     # figures from an existing csv

Writes cliffwalk.csv (one row per run), cliffwalk_summary.md, figure1.png (tabular: uniform,
oracle, greedy TD-error) and figure2.png (linear: uniform, oracle, rank-based, proportional).

    python -m cliffwalk --compare signals --max-n 10 --out results/cliffwalk_signals
    python -m cliffwalk --compare streaming --min-n 4 --max-n 10 --out results/cliffwalk_streaming

--compare signals: the priority signals |δ|, its change between replays and the norm of the
parameter change, each with the proportional and the rank-based sampler, against uniform and
the oracle (signals.csv, signals_summary.md, signals_{tabular,linear}_{sampler}.png).
--compare streaming: a memory of --memory-fraction of 2^(n+1) − 2 transitions fed by random
episodes, forgetting the oldest or the lowest-priority transition, under uniform and
proportional sampling (streaming.csv, streaming_summary.md, streaming_{tabular,linear}.png).
"""

import argparse
import multiprocessing
import sys
import time
from collections.abc import Sequence
from dataclasses import fields
from operator import attrgetter
from pathlib import Path
from typing import NoReturn

from artifacts.command_line import (
    OneLineParser,
    at_least,
    available_memory,
    output_directory,
    say,
)
from cliffwalk.experiment import (
    PAPER,
    SIGNALS,
    RunResult,
    Study,
    paired_table,
    parse_variant,
    read_results,
    write_results,
)
from cliffwalk.learners import memory_size
from cliffwalk.plots import markdown_table, plot_figure, summarize
from cliffwalk.strategies import ReplaySettings
from cliffwalk.streaming import STREAMING

COMPARISONS = {study.name: study for study in (SIGNALS, STREAMING)}


def parse_args(argv=None) -> argparse.Namespace:
    parser = OneLineParser(
        prog="python -m cliffwalk",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--min-n", type=at_least(2), default=2, help="smallest number of states")
    parser.add_argument("--max-n", type=at_least(2), default=12, help="largest number of states")
    parser.add_argument("--seeds", type=at_least(1), default=10, help="runs per variant and n")
    parser.add_argument("--out", type=output_directory, default=Path("results/cliffwalk"))
    parser.add_argument("--jobs", type=at_least(1), default=2, help="parallel worker processes")
    parser.add_argument(
        "--compare",
        choices=list(COMPARISONS),
        help="run this comparison instead of the paper's figures",
    )
    parser.add_argument(
        "--variants",
        nargs="+",
        help="REPRESENTATION/STRATEGY, e.g. linear/proportional (default: every "
        "variant the figures draw)",
    )
    parser.add_argument(
        "--max-updates",
        type=at_least(1.0, float),
        default=1e7,
        help="cap per run; capped runs are reported as such",
    )
    parser.add_argument("--proportional-exponent", type=at_least(0.0, float), default=0.6, help="α")
    parser.add_argument("--rank-exponent", type=at_least(0.0, float), default=0.7, help="α")
    parser.add_argument(
        "--priority-epsilon", type=at_least(0.0, float, strict=True), default=0.01, help="ε"
    )
    parser.add_argument(
        "--rank-segments",
        type=at_least(1),
        default=32,
        help="k equal-probability segments of the rank-based sampler",
    )
    parser.add_argument(
        "--memory-fraction",
        type=at_least(0.0, float, strict=True),
        default=0.25,
        help="streaming: capacity as a fraction of 2^(n+1) − 2",
    )
    parser.add_argument(
        "--replay-ratio",
        type=at_least(1),
        default=8,
        help="streaming: updates per arriving transition",
    )
    parser.add_argument(
        "--replot",
        action="store_true",
        help="only redraw figures and summary from OUT/cliffwalk.csv (or the comparison's csv)",
    )
    args = parser.parse_args(argv)
    if args.max_n < args.min_n:
        parser.error(f"--max-n {args.max_n} is not allowed: must be >= --min-n ({args.min_n})")
    return args


def settings_from(args: argparse.Namespace) -> ReplaySettings:
    """Every setting an option of the same name gives (all but the tolerance)."""
    given = {f.name: getattr(args, f.name) for f in fields(ReplaySettings) if f.name in args}
    return ReplaySettings(**given | {"max_updates": int(args.max_updates)})


def report(results, out: Path, study: Study = PAPER) -> str:
    """Writes the figures and the summary markdown, and returns the markdown."""
    summaries = summarize(results)
    sections = []
    for name, panel in study.panels.items():
        plot_figure(summaries, panel, out / f"{name}.png", study)
        table = markdown_table(
            summaries, panel.representation, panel.strategies, study.memory_column
        )
        sections.append(f"### {panel.title}\n\nmedian [min–max] {study.updates}\n\n{table}\n")
    if study.comparisons:
        sections.append(paired_table(results, study.paired_title, study.comparisons))
    text = "\n".join(sections)
    (out / f"{study.name}_summary.md").write_text(text)
    return text


def stop(message: str, status: int = 2) -> NoReturn:
    say(f"error: {message}")
    sys.exit(status)


# The most memory one run takes per transition of its memory, measured at n = 18 and 20
# (peak resident memory 274-280 bytes: mostly the exhaustive fill's Python tuples), rounded up.
RUN_BYTES_PER_TRANSITION = 300


def check_memory(args: argparse.Namespace, variants: Sequence[str]) -> None:
    """Refuse, before any work, a grid whose workers, each on a largest run, would not fit."""
    runs = len(variants) * args.seeds * (args.max_n - args.min_n + 1)
    needed = min(args.jobs, runs) * RUN_BYTES_PER_TRANSITION * memory_size(args.max_n)
    available, limit = available_memory()
    if needed > available:
        stop(
            f"--max-n {args.max_n} is not allowed here: {min(args.jobs, runs)} run(s) at "
            f"once of 2^{args.max_n + 1} - 2 transitions need about {needed / 1e9:.3g} GB and "
            f"this machine has {available / 1e9:.3g} GB available{limit} (lower --max-n or --jobs)"
        )


def _run_task(task) -> RunResult:
    run, *arguments = task
    return run(*arguments)


def run(args: argparse.Namespace, study: Study, variants: Sequence[str], csv_path: Path):
    """Every (variant, n, seed) run of `study`, largest memories first so the slowest start
    early, written to `csv_path`; by a grid that fails part-way, the runs it finished."""
    settings, start, finished, error = settings_from(args), time.perf_counter(), [], None
    tasks = [
        (study.run, variant, n, seed, settings)
        for n in range(args.max_n, args.min_n - 1, -1)
        for variant in variants
        for seed in range(args.seeds)
    ]
    try:
        with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
            for r in pool.imap_unordered(_run_task, tasks):
                finished.append(r)
                say(
                    f"[{len(finished)}/{len(tasks)}] {r.representation}/{r.strategy} n={r.n} "
                    f"seed={r.seed}: {r.updates} updates, {r.status}, {r.seconds:.2f}s"
                )
    except (Exception, KeyboardInterrupt) as caught:
        error = caught
    results = sorted(finished, key=attrgetter("representation", "strategy", "n", "seed"))
    if results:
        args.out.mkdir(parents=True, exist_ok=True)
        write_results(results, csv_path, study.result)
    if error is not None:
        interrupted = isinstance(error, KeyboardInterrupt)
        kept = f"the {len(results)} run(s) finished are in {csv_path}"
        cause = "interrupted" if interrupted else f"failed ({error!r})"
        stop(
            f"the grid {cause}; {kept if results else 'no run had finished'}",
            130 if interrupted else 1,
        )
    say(f"{len(results)} runs in {time.perf_counter() - start:.1f} s")
    return results


def main(argv=None) -> None:
    args = parse_args(argv)
    study = COMPARISONS[args.compare] if args.compare else PAPER
    variants = args.variants or study.variants
    for variant in variants:
        parse_variant(variant, study.strategies)  # fail before any output is written
    csv_path = args.out / f"{study.name}.csv"
    if args.replot:
        if not csv_path.is_file():
            stop(f"--replot needs {csv_path}: there is no such file")
        results = read_results(csv_path, study.result)
    else:
        check_memory(args, variants)
        results = run(args, study, variants, csv_path)
    print(report(results, args.out, study))
    figures = ", ".join(f"{name}.png" for name in study.panels)
    say(f"wrote {csv_path}, {figures}, {study.name}_summary.md in {args.out}")


if __name__ == "__main__":
    main()
