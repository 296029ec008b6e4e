"""`probes ablate`: the command line over ``probes.ablation.ablate``."""
from __future__ import annotations

import argparse

from probes.arguments import add_code_argument, chosen_options, input_path
from probes.results import check_output_folder

EPILOG = """\
examples:
  probes ablate classify --model genre-minilm/ --corpus en_ewt-ud-test.conllu --label-from sent_id-prefix \\
      --sweep heads --sweep layers --out results/ablation/
  probes ablate classify --model my-classifier/ --corpus test.tsv --mask 2:3,4:0 --mask 5:* --mode uniform
  probes ablate classify --model my-classifier/ --corpus test.tsv --sweep random --percent 10 --percent 50 --repeats 10
  probes ablate dep --corpus en_ewt-ud-test.conllu --mask 2:*        # what losing layer 2 does to later heads

Heads are LAYER:HEAD, 0-indexed; LAYER:* is a whole layer. zero: a disabled head's output (its
slice of the context before the output projection) is 0; uniform: it attends 1/n to each of the
n real tokens. With no --sweep and no --mask, every single head is swept. Deltas are score with
the heads disabled minus the baseline (nothing disabled), evaluated in the same passes.
Results: DIR/ablation-<target>.json, .csv and delta heatmaps.
"""


def add_commands(sub) -> None:
    from probes.ablation.masking import MODES
    from probes.ablation.masks import SWEEPS
    from probes.pooling import POOLING_RULES

    p = sub.add_parser("ablate", help="disable attention heads and measure what a model or a probe loses",
                       description="Disable attention heads (single heads, layers, halves, random sets, or your own "
                       "lists) and measure the change of a fine-tuned classifier's accuracy and macro-F1, or of a "
                       "probe's scores.", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", metavar="TARGET", help="classify (a sequence-classification checkpoint on labelled "
                   "data) or a probe name (see `probes list`)")
    p.add_argument("--model", help="checkpoint directory or hub name (probes: default the packaged MiniLM)")
    p.add_argument("--corpus", action="append", metavar="FILE", type=input_path, help="classify: TSV (text[<TAB>text_pair]<TAB>label) "
                   "or CoNLL-U with a sentence label; probes: their corpus; repeat for several")
    p.add_argument("--format", help="classify: tsv or conllu; probes: a corpus format (default: from the file name)")
    p.add_argument("--label-from", default="label", metavar="KEY",
                   help="classify, CoNLL-U: the comment '# KEY = ...' holding the label (default label), or "
                   "sent_id-prefix: the part of '# sent_id' before the first '-' (EWT genres)")
    p.add_argument("--sweep", action="append", choices=SWEEPS,
                   help="heads: every single head; layers: every layer; halves: bottom and top half of the layers; "
                   "random: --percent of the heads, --repeats draws (repeat --sweep for several)")
    p.add_argument("--mask", action="append", metavar="L:H,...", help="disable these heads together, e.g. 2:3,4:0 "
                   "or 2:* (repeat for several masks)")
    p.add_argument("--mode", choices=MODES, default="zero", help="zero (default): the head's output is 0; uniform: "
                   "it attends equally to every real token (Kovaleva et al. 2019)")
    p.add_argument("--percent", type=float, action="append", metavar="K",
                   help="random sweep: disable K%% of all heads (repeat for several; default 10)")
    p.add_argument("--repeats", type=int, default=5, help="random sweep: draws per K (default 5)")
    p.add_argument("--random-seed", type=int, default=0, help="random sweep: seed of the draws (default 0)")
    p.add_argument("--label", default="overall", help="probes: the label whose scores are compared (default overall)")
    p.add_argument("--out", metavar="DIR", type=check_output_folder,
                   help="write DIR/ablation-<target>.json, .csv and heatmaps")
    p.add_argument("--top", type=int, default=5, help="masks to print that hurt (and help) most (default 5)")
    p.add_argument("--batch-size", type=int, default=32, help="sentences per batch (default 32)")
    p.add_argument("--masks-per-pass", type=int, default=16,
                   help="classify: masks evaluated together in one forward pass (default 16)")
    p.add_argument("--max-length", type=int, help="most tokens per sentence incl. special tokens (default: the "
                   "model's limit); longer sentences are skipped and counted")
    p.add_argument("--limit", type=int, help="use only the first N sentences")
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    p.add_argument("--pool", choices=POOLING_RULES, help="probes: subword→word pooling (default mean-sum)")
    add_code_argument(p)
    p.add_argument("--no-plots", action="store_true", help="write JSON and CSV only, no heatmaps")
    p.add_argument("--quiet", action="store_true", help="no progress bar")  # probe options: probes.cli adds them


def cmd_ablate(args: argparse.Namespace) -> int:
    from probes.ablation.sweep import ablate

    run_options = {"pool": args.pool} if args.pool else {}  # pool is probes.run's, not a probe option
    result = ablate(args.target, model=args.model, corpus=args.corpus, sweeps=args.sweep, masks=args.mask or (),
                    mode=args.mode, percents=args.percent or (10.0,), repeats=args.repeats, seed=args.random_seed,
                    format=args.format, label_from=args.label_from, label=args.label, batch_size=args.batch_size,
                    masks_per_pass=args.masks_per_pass, max_length=args.max_length, limit=args.limit,
                    device=args.device, progress=False if args.quiet else None, **run_options, **chosen_options(args))
    print(result.summary(top=args.top))
    if args.out:
        written = result.save(args.out, plots=not args.no_plots)
        print(f"wrote {len(written)} files to {args.out}")
    return 0


COMMANDS = {"ablate": cmd_ablate}
