"""`probes sequences`: the causal detectors' generated sequences written as a ``.ids`` file (probes.encoding.sequences),
which `probes run --corpus FILE.ids` reads back as the model's token ids (probes.corpus.token_ids), never tokenised
again."""
from __future__ import annotations

import argparse

from probes.base.argtypes import check_output_file
from probes.base.errors import InputError

EPILOG = """\
examples:
  probes sequences --repeated --model ./gpt2-small --out repeated.ids
  probes sequences --repeated --count 256 --length 128 --seed 1 --model ./gpt2-small --out long.ids
  probes run induction prev_token duplicate_token sink --model ./gpt2-small --corpus repeated.ids

The sequences are those `probes.tools.detect.detect` scores by default: with the same model, count, length and
seed, `probes run --corpus FILE.ids` gives its scores. The ids index the model's vocabulary: score them with the
model they were drawn for (the file's first line names it).
"""


def add_commands(sub) -> None:
    p = sub.add_parser("sequences", help="write the causal detectors' generated sequences as a .ids file",
                       description="Write generated token-id sequences for the causal detectors (induction, "
                       "prev_token, duplicate_token, sink) as a .ids file: one sequence a line, the model's token ids, "
                       "read back as ids by `probes run --corpus FILE.ids`.", epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeated", action="store_true", required=True,
                   help="random tokens repeated (Olsson et al. 2022): LENGTH ids drawn uniformly from the model's "
                   "vocabulary without its special tokens, then the same LENGTH again (the only kind so far)")
    p.add_argument("--count", type=int, default=64, metavar="N", help="sequences (default 64)")
    p.add_argument("--length", type=int, default=64, metavar="L",
                   help="ids drawn per sequence; each sequence is 2 × L ids long (default 64)")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="seed of the draw (default 0)")
    p.add_argument("--model", help="checkpoint directory or hub name whose vocabulary the ids are drawn from "
                   "(default: the packaged all-MiniLM-L6-v2); only its tokenizer is read")
    p.add_argument("--out", metavar="FILE.ids", type=check_output_file, required=True,
                   help="the file to write (its name must end in .ids, which is how a run knows to read ids)")


def cmd_sequences(args: argparse.Namespace) -> int:
    if args.out.suffix != ".ids":
        raise InputError("the sequences file's name must end in .ids (a run reads a .ids file as token ids; any other "
                         "name would be read as text and tokenised again)", args.out)
    from probes.encoding.sequences import repeated_description, repeated_random_tokens, write_token_ids
    from probes.capture.model import model_tokenizer

    model = args.model or "the packaged all-MiniLM-L6-v2"
    sequences = repeated_random_tokens(model_tokenizer(args.model), args.count, args.length, args.seed)  # [N, 2·L]
    write_token_ids(args.out, sequences, f"{repeated_description(args.count, args.length, args.seed)}; "
                    f"token ids of {model}")
    print(f"wrote {args.count} sequences of {2 * args.length} token ids (random tokens repeated, seed {args.seed}) "
          f"to {args.out}")
    return 0


COMMANDS = {"sequences": cmd_sequences}
