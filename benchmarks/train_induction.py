"""Train the 2-layer attention-only GPT-2 in which the causal detectors' tests find an induction head.

    python benchmarks/train_induction.py [OUT]     # default tests/data/induction-gpt2; a few CPU minutes

The model: GPT-2 config, 2 layers, 4 heads, d_model 128, 64 positions, a vocabulary of 64 word-level tokens
("<|endoftext|>" id 0, never trained on, and t1..t63). GPT-2's blocks have a feed-forward part; here it is one
unit wide (n_inner 1) with every weight and bias zero and frozen, so it adds exactly 0: the model is attention
only, as Olsson et al. 2022's small models (layer norms and the token and position embeddings are kept).

The data: sequences of 64 tokens, a span of 12-28 tokens drawn uniformly from t1..t63 repeated from the start to
the end (its length random per sequence): after the first copy every token is predictable, by looking back for
the previous occurrence of the current token and reading what followed it (an induction head in layer 1 composed
with a previous-token head in layer 0). The periods vary over 12-28, so no head at one fixed offset solves it
(with periods of 4-12 the model learned such positional heads instead); the loss falls from the unigram plateau
(about 3.4) to about 1.4 (the first copy's tokens cannot be predicted) between steps 250 and 500. AdamW, lr 1e-3,
batches of 32, 1000 steps, one thread; seed SEED fixes the data and the initialisation. The weights, config and
tokenizer are written with save_pretrained (safetensors), the initial ones under init/ (the same architecture
untrained, the tests' baseline).
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

SEED = 29
VOCAB = 64  # ids 0..63; 0 is the special "<|endoftext|>"
POSITIONS = 64  # the model's context
LENGTH = 64  # training sequences
STEPS = 1000
BATCH = 32


def tokenizer():
    """A word-level fast tokenizer over "<|endoftext|>", t1..t63 (what probes' loader accepts)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<|endoftext|>": 0, **{f"t{i}": i for i in range(1, VOCAB)}}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<|endoftext|>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<|endoftext|>", eos_token="<|endoftext|>",
                                   unk_token="<|endoftext|>", pad_token="<|endoftext|>", model_max_length=POSITIONS)


def model():
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(vocab_size=VOCAB, n_positions=POSITIONS, n_embd=128, n_layer=2, n_head=4, n_inner=1,
                        bos_token_id=0, eos_token_id=0, pad_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0,
                        attn_pdrop=0.0)
    net = GPT2LMHeadModel(config)
    for block in net.transformer.h:  # the feed-forward part adds exactly 0 (see the module docstring)
        for p in block.mlp.parameters():
            p.data.zero_()
            p.requires_grad_(False)
    return net


def batch(generator: torch.Generator) -> torch.Tensor:
    """[BATCH, LENGTH] a random span of 12-28 tokens repeated from the start to the end."""
    x = torch.randint(1, VOCAB, (BATCH, LENGTH), generator=generator)  # [B,T]
    n = torch.randint(12, 29, (BATCH, 1), generator=generator)  # [B,1] span lengths
    return x.gather(1, torch.arange(LENGTH) % n)  # [B,T] position k reads position k mod n


def with_output_embedding(folder: Path) -> None:
    """The output embedding written into folder/model.safetensors beside the input one it is tied to (the same
    values): save_pretrained leaves it out, and a load then depends on transformers tying a missing tensor, which
    in some test runs it did not (the model's lm_head left empty on "meta")."""
    from safetensors.torch import load_file, save_file

    path = folder / "model.safetensors"
    weights = load_file(path)
    weights["lm_head.weight"] = weights["transformer.wte.weight"].clone()
    save_file(weights, path, metadata={"format": "pt"})


def main(out: Path) -> None:
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    net = model()
    tok = tokenizer()
    net.save_pretrained(out / "init")
    tok.save_pretrained(out / "init")
    with_output_embedding(out / "init")
    generator = torch.Generator().manual_seed(SEED)
    optimiser = torch.optim.AdamW([p for p in net.parameters() if p.requires_grad], lr=1e-3, weight_decay=0.0)
    net.train()
    for step in range(STEPS):
        x = batch(generator)
        loss = net(input_ids=x, labels=x).loss
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        if step % 250 == 0 or step == STEPS - 1:
            print(f"step {step}: loss {loss.item():.3f}", flush=True)
    net.eval()
    net.save_pretrained(out)
    tok.save_pretrained(out)
    with_output_embedding(out)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "tests" / "data" / "induction-gpt2")
