"""`probes ablate`: the command line over ``probes.tools.ablation.ablate``."""
from __future__ import annotations

import argparse

from probes.base.argtypes import check_output_folder, input_path
from probes.tools.arguments import add_settings, chosen_options, chosen_settings
from probes.base.choices import CLASSIFY, MODES, SWEEPS
from probes.settings.run_settings import ABLATE_SETTINGS, RunSettings
from probes.base.errors import InputError

EPILOG = """\
examples:
  probes ablate classify --model genre-minilm/ --corpus en_ewt-ud-test.conllu --label-from sent_id-prefix \\
      --sweep heads --sweep layers --out results/ablation/
  probes ablate classify --model my-classifier/ --corpus test.tsv --mask 2:3,4:0 --mask 5:* --mode uniform
  probes ablate classify --model my-classifier/ --corpus test.tsv --sweep random --percent 10 --percent 50 --repeats 10
  probes ablate dep --corpus en_ewt-ud-test.conllu --mask 2:*        # what losing layer 2 does to later heads
  probes ablate dep --corpus en_ewt-ud-dev.conllu --keep 2:3,3:1 --in-layers 0-5   # only those two heads left
  probes ablate classify --model genre-minilm/ --corpus en_ewt-ud-test.conllu --label-from sent_id-prefix --importance
  probes ablate classify --model genre-minilm/ --corpus en_ewt-ud-test.conllu --label-from sent_id-prefix \
      --order importance --order random --order probe:dep:nsubj --order-corpus en_ewt-ud-dev.conllu --out results/pruning/

Heads are LAYER:HEAD, 0-indexed; LAYER:* is a whole layer. zero: a disabled head's output (its
slice of the context before the output projection) is 0; uniform: it attends 1/n to each of the
n real tokens. With no --sweep, --mask or --keep, every single head is swept. Deltas are score
with the heads disabled minus the baseline (nothing disabled), evaluated in the same passes.
Probe targets, zero mode: a disabled head's own cells are NaN (not scored: its attention map is
still computed, but its output is gone) and never count as the best head or in the mean; in
uniform mode its map is the uniform one and is scored.
Results: DIR/ablation-<target>.json, .csv and delta heatmaps.

classify only: --importance writes DIR/ablation-importance.json and .png, the gradient importance
E_x|dL/dξ_h| of each head's gate (Michel et al. 2019), normalised per layer by its l2 norm as in the
paper unless --no-normalize. --order gives pruning curves instead of a sweep: heads disabled in that
order in steps of --prune-step percent (importance: least important first; probe:NAME[:LABEL]: the
lowest-scoring heads of that probe label first; random: --repeats seeded orders), all curves in
DIR/ablation-pruning.json, .csv and one .png per metric. Importance and probe orders are computed on
--order-corpus (default --corpus).
"""


def add_commands(sub) -> None:
    p = sub.add_parser("ablate", help="disable attention heads and measure what a model or a probe loses",
                       description="Disable attention heads (single heads, layers, halves, random sets, or your own "
                       "lists) and measure the change of a fine-tuned classifier's accuracy and macro-F1, or of a "
                       "probe's scores.", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", metavar="TARGET", help="classify (a sequence-classification checkpoint on labelled "
                   "data) or a probe name (see `probes list`)")
    p.add_argument("--model", help="checkpoint directory or hub name (probes: default the packaged MiniLM)")
    p.add_argument("--corpus", action="append", metavar="FILE", type=input_path, help="classify: TSV (text[<TAB>text_pair]<TAB>label) "
                   "or CoNLL-U with a sentence label; probes: their corpus; repeat for several")
    p.add_argument("--label-from", default="label", metavar="KEY",
                   help="classify, CoNLL-U: the comment '# KEY = ...' holding the label (default label), or "
                   "sent_id-prefix: the part of '# sent_id' before the first '-' (EWT genres)")
    p.add_argument("--sweep", action="append", choices=SWEEPS,
                   help="heads: every single head; layers: every layer; halves: bottom and top half of the layers; "
                   "random: --percent of the heads, --repeats draws (repeat --sweep for several)")
    p.add_argument("--mask", action="append", metavar="L:H,...", help="disable these heads together, e.g. 2:3,4:0 "
                   "or 2:* (repeat for several masks)")
    p.add_argument("--keep", action="append", metavar="L:H,...", help="keep-mask: disable every other head of "
                   "the --in-layers layers, e.g. 2:3,3:1 (repeat for several masks)")
    p.add_argument("--in-layers", metavar="RANGE", help="--keep: the layers it applies to, e.g. 0-5 or 1,3-4 "
                   "(default every layer)")
    p.add_argument("--importance", action="store_true", help="classify: gradient head importance (Michel et al. "
                   "2019) on the data; with --order, adds the importance order")
    p.add_argument("--no-normalize", action="store_true", help="importance: do not normalise each layer's scores "
                   "by their l2 norm (the paper normalises; so does the default)")
    p.add_argument("--order", action="append", metavar="ORDER", help="classify: pruning curves for this order: "
                   "importance, random, or probe:NAME[:LABEL] such as probe:dep:nsubj (repeat for several)")
    p.add_argument("--order-corpus", action="append", metavar="FILE", type=input_path,
                   help="data for the importance and probe orders (default: --corpus)")
    p.add_argument("--prune-step", type=float, default=10.0, metavar="K", help="pruning curves: percent of the "
                   "heads between points (default 10)")
    p.add_argument("--mode", choices=MODES, default="zero", help="zero (default): the head's output is 0 (probes: its "
                   "own cells are NaN, not scored); uniform: it attends equally to every real token (Kovaleva et al. "
                   "2019)")
    p.add_argument("--percent", type=float, action="append", metavar="K",
                   help="random sweep: disable K%% of all heads (repeat for several; default 10)")
    p.add_argument("--repeats", type=int, default=5, help="random sweep: draws per K; pruning: random orders "
                   "(default 5)")
    p.add_argument("--random-seed", type=int, default=0, help="random sweep and orders: their seed (default 0)")
    p.add_argument("--label", default="overall", help="probes: the label whose scores are compared (default overall)")
    p.add_argument("--out", metavar="DIR", type=check_output_folder,
                   help="write DIR/ablation-<target>.json, .csv and heatmaps")
    p.add_argument("--top", type=int, default=5, help="masks to print that hurt (and help) most (default 5)")
    p.add_argument("--masks-per-pass", type=int, default=16,
                   help="masks evaluated together in one forward pass (default 16)")
    add_settings(p, ABLATE_SETTINGS, format="classify: tsv or conllu; probes: a corpus format (default: from the file "
                 "name)", batch_size="sentences per batch (default 32)", max_length="most tokens per sentence incl. "
                 "special tokens (default: the model's limit); longer sentences are skipped and counted",
                 limit="use only the first N sentences", pool="probes: subword→word pooling (default mean-sum)")
    p.add_argument("--no-plots", action="store_true", help="write JSON and CSV only, no heatmaps")
    p.add_argument("--quiet", action="store_true", help="no progress bar")  # probe options: probes.cli adds them


def cmd_ablate(args: argparse.Namespace) -> int:
    from probes.tools.ablation.sweep import ablate

    if (args.order or args.importance) and args.target != CLASSIFY:
        raise InputError("--importance and --order are for the classify target")
    if args.order or args.importance:
        return _importance_or_pruning(args)
    settings = RunSettings(**chosen_settings(args))  # ABLATE_SETTINGS' flags
    result = ablate(args.target, model=args.model, corpus=args.corpus, settings=settings, sweeps=args.sweep,
                    masks=args.mask or (), keeps=args.keep or (), in_layers=args.in_layers, mode=args.mode,
                    percents=args.percent or (10.0,), repeats=args.repeats, random_seed=args.random_seed,
                    label_from=args.label_from, label=args.label, masks_per_pass=args.masks_per_pass,
                    progress=False if args.quiet else None, **chosen_options(args))
    print(result.summary(top=args.top))
    if args.out:
        written = result.save(args.out, plots=not args.no_plots)
        print(f"wrote {len(written)} files to {args.out}")
    return 0


def _importance_or_pruning(args: argparse.Namespace) -> int:
    """--importance alone: the importance grid; --order: pruning curves."""
    from probes.tools.ablation.classifier import ClassifierTarget
    from probes.tools.ablation.importance import head_importance, importance_files
    from probes.tools.ablation.pruning import IMPORTANCE, prune
    from probes.base.files import write_result_files

    if not args.corpus or not args.model:
        raise InputError("--importance and --order need a classifier (--model) and labelled data (--corpus)")
    if args.set_dtype != "float32":
        raise InputError("--dtype is for probe targets; --importance and --order run the classifier in float32")
    common = dict(format=args.set_format, label_from=args.label_from, limit=args.set_limit, device=args.set_device,
                  max_length=args.set_max_length)
    if not args.order:
        target = ClassifierTarget(args.model, args.order_corpus or args.corpus, **common)
        importance = head_importance(target, normalize=not args.no_normalize, batch_size=args.set_batch_size)
        print("\n".join(f"L{layer}: " + " ".join(f"{x:.3f}" for x in row) for layer, row in enumerate(importance)))
        if args.out:
            written = write_result_files(args.out, importance_files(importance, target, not args.no_normalize))
            print(f"wrote {len(written)} files to {args.out}")
        return 0
    orders = [*args.order, *([IMPORTANCE] if args.importance else [])]
    result = prune(args.model, args.corpus, orders, order_data=args.order_corpus, step=args.prune_step,
                   repeats=args.repeats, seed=args.random_seed, normalize=not args.no_normalize, mode=args.mode,
                   batch_size=args.set_batch_size, masks_per_pass=args.masks_per_pass,
                   progress=False if args.quiet else None, **common)
    print(result.summary())
    if args.out:
        written = result.save(args.out, plots=not args.no_plots)
        print(f"wrote {len(written)} files to {args.out}")
    return 0


COMMANDS = {"ablate": cmd_ablate}
