"""The comparison commands of the `probes` CLI: compare, similarity, correlate, plot."""
from __future__ import annotations

import argparse
import sys

from probes.base.argtypes import check_output_file, check_output_folder
from probes.base.argtypes import input_path
from probes.base.choices import COMPARE_SORTS
from probes.base.errors import InputError

EPILOG = """\
examples:
  probes compare results/minilm results/sre --out results/minilm-vs-sre
  probes similarity --model sentence-transformers/all-MiniLM-L6-v2 --model ./finetuned --corpus en_ewt-ud-dev.conllu
  probes correlate pruning_gates.npy results/minilm/
  probes plot importance.csv --out plots/
"""


def add_commands(sub) -> None:
    """Add the comparison subcommands to the CLI's subparsers."""
    compare = sub.add_parser("compare", help="compare two results folders head by head (B − A)",
                             description="Compare two results folders (same probes, models of one architecture): "
                             "per label the counts, the best head and score in each, the change, the heads that gained "
                             "or lost most, and delta heatmaps; labels lost (below --min-count or absent in B) and "
                             "deltas resting on few instances are flagged. A or B may also be single files, any layers × heads array "
                             "(.npy, .json, .csv) included.", epilog=EPILOG,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
    compare.add_argument("a", metavar="A", type=input_path, help="results folder (or file) of the first model")
    compare.add_argument("b", metavar="B", type=input_path, help="results folder (or file) of the second model")
    compare.add_argument("--all-labels", action="store_true",
                         help="also the labels below the runs' --min-count in both A and B (always in the files)")
    compare.add_argument("--sort", choices=COMPARE_SORTS, default="count",
                         help="the table's order within each probe: count (default: most instances in A and B first, "
                         "as `probes show`), score (B's best score, highest first), delta (the change of the best score, "
                         "largest either way first) or label; overall last (the files keep the results' order)")
    _outputs(compare, "write compare.json, compare.csv and <probe>-<label>-delta.png here")

    similarity = sub.add_parser("similarity", help="per-head cosine similarity of two checkpoints' attention maps",
                                description="Run the same batches through two checkpoints and compare every head's "
                                "attention maps by cosine similarity, averaged over sentences (Kovaleva et al. 2019).")
    similarity.add_argument("--model", action="append", required=True, metavar="DIR_OR_NAME",
                            help="a checkpoint; give exactly two")
    similarity.add_argument("--corpus", action="append", metavar="FILE", type=input_path,
                            help="corpus file; repeat for several (default: the bundled UD English EWT sample)")
    similarity.add_argument("--format", help="corpus format (default: from the file name)")
    similarity.add_argument("--batch-size", type=int, default=32, help="sentences per forward pass (default 32)")
    similarity.add_argument("--max-length", type=int, help="most subwords per sentence (default: the models' limit)")
    similarity.add_argument("--limit", type=int, help="use only the first N sentences")
    similarity.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    _outputs(similarity, "write similarity.json, .csv and heatmap here")

    correlate = sub.add_parser("correlate", help="Spearman correlation over heads of a grid with probe scores",
                               description="Rank-correlate any layers × heads grid (.npy, .json, .csv: pruning gates, "
                               "importance scores) with every label of probe results, over heads, with permutation "
                               "p-values corrected over every label tested.")
    correlate.add_argument("grid", metavar="GRID", type=input_path,
                           help="a layers × heads array file, or a results file")
    correlate.add_argument("results", metavar="RESULTS", type=input_path, help="a results folder or file")
    correlate.add_argument("--correction", choices=("holm", "bh", "none"), default="holm",
                           help="over all labels tested: holm (family-wise error, default), bh (Benjamini–Hochberg "
                           "false discovery rate) or none")
    correlate.add_argument("--alpha", type=float, default=0.05, help="significance level (default 0.05)")
    correlate.add_argument("--permutations", type=int, metavar="N", help="shuffles of the heads per label (default: "
                           "the larger of 9999 and 10 × tests / alpha; fewer than tests / alpha is refused)")
    correlate.add_argument("--seed", type=int, default=0, help="seed of the permutations (default 0)")
    correlate.add_argument("--out", metavar="FILE.csv", type=check_output_file, help="also write the table as CSV")

    plot = sub.add_parser("plot", help="heatmaps of a results file or of any layers × heads array",
                          description="Draw the layer × head heatmaps of a results file or of a .npy/.json/.csv grid.")
    plot.add_argument("file", metavar="FILE", type=input_path, help="a results file, or a layers × heads array file")
    plot.add_argument("--out", metavar="DIR", required=True, type=check_output_folder, help="folder for the PNG files")
    plot.add_argument("--all-labels", action="store_true", help="also the labels below the run's --min-count")


def _outputs(parser: argparse.ArgumentParser, out_help: str) -> None:
    parser.add_argument("--out", metavar="DIR", type=check_output_folder, help=out_help)
    parser.add_argument("--no-plots", action="store_true", help="no heatmaps")


def cmd_compare(args: argparse.Namespace) -> int:
    from probes.tools.compare.results_diff import compare_results

    comparison = compare_results(args.a, args.b)
    if comparison.left_out:
        print(f"probes: compared the probes both hold; left out {', '.join(comparison.left_out)}", file=sys.stderr)
    print(comparison.format_table(all_labels=args.all_labels, sort=args.sort))
    if args.out:
        written = comparison.save(args.out, plots=not args.no_plots, all_labels=args.all_labels)
        print(f"wrote {len(written)} files to {args.out}")
    return 0


def cmd_similarity(args: argparse.Namespace) -> int:
    from probes.tools.compare.checkpoints import checkpoint_similarity

    if len(args.model) != 2:
        raise InputError(f"similarity needs exactly two --model arguments, got {len(args.model)}")
    result = checkpoint_similarity(args.model[0], args.model[1], args.corpus, format=args.format,
                                   batch_size=args.batch_size, max_length=args.max_length, limit=args.limit,
                                   device=args.device)
    print(format_similarity(result))
    if args.out:
        written = result.save(args.out, plots=not args.no_plots)
        print(f"wrote {len(written)} files to {args.out}")
    return 0


def format_similarity(result, top: int = 5) -> str:
    import numpy as np

    grid = result.overall.scores
    lines = [f"A: {result.info.model}", f"B: {result.extra['model_b']}",
             f"{result.info.sentences} sentences; cosine similarity of attention maps per head (1 = unchanged)",
             "layer  mean   min head"]
    for layer, row in enumerate(grid):
        lines.append(f"{layer:>5}  {row.mean():.3f}  {row.min():.3f} H{int(row.argmin())}")
    order = np.argsort(grid, axis=None)[:top]
    lines.append("changed most: " + ", ".join(f"L{i // grid.shape[1]}-H{i % grid.shape[1]} {grid.flat[i]:.3f}"
                                              for i in order))
    return "\n".join(lines)


def cmd_correlate(args: argparse.Namespace) -> int:
    from probes.tools.compare.correlate import correlate
    from probes.tools.compare.grids import load_any
    from probes.tools.compare.results_diff import load_results
    from probes.base.files import write_result_files

    table = correlate(load_any(args.grid), load_results(args.results), correction=args.correction,
                      alpha=args.alpha, permutations=args.permutations, seed=args.seed)
    table = table.reindex(table["spearman"].abs().sort_values(ascending=False, na_position="last").index)
    print(format_correlation(table))
    if args.out:
        write_result_files(args.out.parent, {args.out.name: table})
    return 0


def format_correlation(table) -> str:
    """The correlate table under a line saying what was tested and corrected for."""
    a = table.attrs
    method = {"holm": "Holm correction", "bh": "Benjamini–Hochberg correction", "none": "no correction"}[a["correction"]]
    head = (f"Spearman's ρ over heads; two-sided permutation p-values ({a['permutations']} shuffles of the heads, "
            f"seed {a['seed']}); {method} over {a['tests']} tests: {int(table['significant'].sum())} significant "
            f"at α = {a['alpha']:g}")
    shown = table.drop(columns=["correction", "tests"])
    return head + "\n" + shown.to_string(index=False, float_format=lambda x: f"{x:.4g}")


def cmd_plot(args: argparse.Namespace) -> int:
    from probes.tools.compare.grids import load_any
    from probes.results.figures import figures_of
    from probes.base.files import write_result_files

    kind = "all-labels" if args.all_labels else "labels"
    written = write_result_files(args.out, figures_of(load_any(args.file), kind))
    print(f"wrote {len(written)} files to {args.out}")
    return 0


COMMANDS = {"compare": cmd_compare, "similarity": cmd_similarity, "correlate": cmd_correlate, "plot": cmd_plot}
