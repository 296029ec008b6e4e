"""The family table (probes.capture.families): the built-in families read the tiny models through their entries, and a
family added from a plugin file with only a table entry is read like a built-in one; a model of no family runs in
all-maps mode with a one-line warning, and what needs the table is refused naming it."""
from __future__ import annotations

import json
import shutil
import textwrap
import warnings

import numpy as np
import pytest

import probes
from probes.capture.families import FAMILIES, Family, UnknownFamilyWarning, family_of, register_family

pytestmark = pytest.mark.integration

# a BERT under another model type: transformers learns the architecture (as any plugin's model would have to be
# loadable), probes learns nothing about it
ARCHITECTURE = textwrap.dedent('''
    import transformers

    class PlainBertConfig(transformers.BertConfig):
        model_type = "plainbert"

    class PlainBertModel(transformers.BertModel):
        config_class = PlainBertConfig

    try:
        transformers.AutoConfig.register("plainbert", PlainBertConfig)
        transformers.AutoModel.register(PlainBertConfig, PlainBertModel)
    except ValueError:  # registered by an earlier test of this session
        pass
''')
# the plugin file: one table entry
FAMILY = textwrap.dedent('''
    from probes.capture.families import Family, register_family

    register_family(Family("plainbert", ("plainbert",)))
''')


@pytest.mark.parametrize("family, entry", [("bert", "bert"), ("roberta", "roberta"), ("electra", "electra"),
                                           ("deberta-v2", "deberta-v2"), ("deberta", "deberta")])
def test_the_builtin_families_read_the_tiny_models(tiny_model, family, entry):
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnknownFamilyWarning)
        encoder = probes.load_encoder(str(tiny_model(family)))
    assert encoder.family is family_of(family) and encoder.family.name == entry
    assert encoder.capture == "hooks" and len(encoder.attention_modules) == encoder.layers


@pytest.fixture
def plain_bert(tiny_model, tmp_path):
    """The tiny BERT checkpoint as model type "plainbert" (its architecture known to transformers only)."""
    architecture = tmp_path / "plainbert_architecture.py"
    architecture.write_text(ARCHITECTURE, encoding="utf-8")
    probes.load_code(architecture)
    folder = shutil.copytree(tiny_model("bert"), tmp_path / "plainbert")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "model_type": "plainbert"}), encoding="utf-8")
    tokenizer = json.loads((folder / "tokenizer_config.json").read_text())
    tokenizer.setdefault("tokenizer_class", "BertTokenizer")
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer), encoding="utf-8")
    return folder


def test_a_model_of_no_family_runs_in_all_maps_mode_with_a_warning(plain_bert, tiny_model):
    with FAMILIES.scoped(), pytest.warns(UnknownFamilyWarning, match="model type 'plainbert' is in no family"):
        encoder = probes.load_encoder(str(plain_bert))
    assert encoder.family is None and encoder.capture == "outputs"
    bert = probes.load_encoder(str(tiny_model("bert")))
    plain = probes.run(["dep"], encoder=encoder, limit=6, replicates=0, progress=False)["dep"]
    reference = probes.run(["dep"], encoder=bert, limit=6, replicates=0, progress=False)["dep"]
    assert (plain.overall.scores == reference.overall.scores).all()
    with pytest.raises(probes.InputError, match=r"in no family of the table \(probes.capture.families\)"):
        probes.run(["dep"], encoder=encoder, limit=6, weights="norm", progress=False)


def test_a_family_from_a_plugin_file_with_only_a_table_entry(plain_bert, tiny_model, tmp_path):
    plugin = tmp_path / "plainbert_family.py"
    plugin.write_text(FAMILY, encoding="utf-8")
    with FAMILIES.scoped():
        probes.load_code(plugin)
        with warnings.catch_warnings():
            warnings.simplefilter("error", UnknownFamilyWarning)
            encoder = probes.load_encoder(str(plain_bert))
        assert encoder.family.name == "plainbert" and encoder.capture == "hooks"
        bert = probes.load_encoder(str(tiny_model("bert")))
        for weights in ("attention", "norm"):
            plain = probes.run(["dep"], encoder=encoder, limit=6, replicates=0, weights=weights, progress=False)
            reference = probes.run(["dep"], encoder=bert, limit=6, replicates=0, weights=weights, progress=False)
            assert (plain["dep"].overall.scores == reference["dep"].overall.scores).all(), weights
    assert family_of("plainbert") is None  # the scope is gone


# the plugin file of a decoder family: one table entry (OLMo is in transformers, not in probes' table)
DECODER_FAMILY = textwrap.dedent('''
    from probes.capture.families import PAD_WITH_END, Family, layers_self_attn, register_family, separate_ov

    register_family(Family("olmo", ("olmo",), causal=True, blocks=layers_self_attn, ov=separate_ov,
                           pad_with=PAD_WITH_END))
''')


@pytest.fixture
def olmo(tmp_path):
    """A tiny random OLMo checkpoint (2 layers, 4 query heads sharing 2 key/value heads, rotary positions) with a
    word-level tokenizer over t2..t63 that has no padding token; and 6 sequences of 12 random tokens repeated."""
    import torch
    import transformers

    from causal_models import tokenizer
    from probes.encoding.sequences import repeated_random_tokens, write_token_ids

    config = transformers.OlmoConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                     num_key_value_heads=2, intermediate_size=64, max_position_embeddings=128,
                                     bos_token_id=1, eos_token_id=0, pad_token_id=0, tie_word_embeddings=False)
    torch.manual_seed(0)
    folder = tmp_path / "olmo"
    transformers.AutoModelForCausalLM.from_config(config).save_pretrained(folder)
    words = tokenizer(bos=False)
    assert words.pad_token is None
    words.save_pretrained(folder)
    sequences = repeated_random_tokens(words, 6, 12, seed=0)  # [6,24]
    write_token_ids(tmp_path / "olmo.ids", sequences, "6 × 12 random tokens repeated")
    return folder, tmp_path / "olmo.ids", torch.from_numpy(sequences)


def test_a_decoder_of_no_family_is_refused(olmo):
    folder, _, _ = olmo
    with FAMILIES.scoped(), pytest.warns(UnknownFamilyWarning, match="model type 'olmo' is in no family"), \
            pytest.raises(probes.InputError, match=r"attends only to earlier tokens .* family 'olmo' is not one probes "
                                                   r"reads decoders of \(gpt2, gpt_neox, llama, qwen2, mistral\)"):
        probes.load_encoder(str(folder))


def test_a_decoder_family_from_a_plugin_file_with_only_a_table_entry(olmo, tmp_path):
    """The entry alone makes `probes run` read OLMo as the built-in decoders are read: its maps computed from each
    layer's queries and keys under SDPA, prev_token's scores those of the eager maps, the copying score that of
    each head's whole circuit W_U·W_O·W_V·W_E, and the tokenizer padding with its end-of-sequence token."""
    import torch
    import transformers

    from probes.cli import main
    from probes.results.probe_result import load_result

    folder, corpus, sequences = olmo
    plugin = tmp_path / "olmo_family.py"
    plugin.write_text(DECODER_FAMILY, encoding="utf-8")
    with FAMILIES.scoped():
        assert main(["run", "prev_token", "induction", "--model", str(folder), "--corpus", str(corpus), "--code",
                     str(plugin), "--replicates", "0", "--no-plots", "--out", str(tmp_path / "out"), "--quiet"]) == 0
        encoder = probes.load_encoder(str(folder))
        assert encoder.causal and encoder.family.name == "olmo" and encoder.windows == [None, None]
        assert encoder.tokenizer.pad_token == "<|endoftext|>"  # the entry's pad_with
    assert family_of("olmo") is None  # the scope is gone
    with pytest.raises(probes.InputError, match=r"a decoder-only entry \(causal\) must say where its attention"):
        register_family(Family("olmo", ("olmo",), causal=True))  # no blocks
    eager = transformers.AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
    with torch.inference_mode():
        maps = torch.stack(eager.base_model(input_ids=sequences, output_attentions=True).attentions)  # [L,N,H,T,T]
    previous = maps.diagonal(-1, -2, -1).double().mean((1, 3))  # [L,H] A[i, i-1] over every row i ≥ 1
    scores = load_result(tmp_path / "out" / "prev_token.json").overall.scores
    assert scores.shape == (2, 4) and np.allclose(scores, previous.numpy(), atol=1e-6, rtol=0)
    tokens = torch.arange(2, 64)  # the vocabulary without <|endoftext|> and <s>
    embedding, unembedding = eager.get_input_embeddings().weight[tokens], eager.get_output_embeddings().weight[tokens]
    copying = np.zeros((2, 4))
    for layer, block in enumerate(eager.model.layers):
        attention = block.self_attn
        for head in range(4):  # query head h reads value head h // 2; head size 8
            value = attention.v_proj.weight[8 * (head // 2):8 * (head // 2 + 1)].detach().double()  # [d,D]
            output = attention.o_proj.weight[:, 8 * head:8 * (head + 1)].detach().double()  # [D,d]
            circuit = unembedding.detach().double() @ output @ value @ embedding.detach().double().T  # [V',V']
            eigen = torch.linalg.eigvals(circuit)  # [V']
            copying[layer, head] = float(eigen.sum().real / eigen.abs().sum())
    induction = load_result(tmp_path / "out" / "induction.json")
    assert np.allclose(induction.labels["copying"].scores, copying, atol=1e-6, rtol=0)  # W_E·W_U summed in float32


def test_folding_the_norms_needs_the_entry_to_say_where_they_are(olmo, tmp_path):
    """The OLMo entry gives no ``norms``: the copying score with the norms left out is read, folded is refused."""
    folder, corpus, _ = olmo
    plugin = tmp_path / "olmo_family.py"
    plugin.write_text(DECODER_FAMILY, encoding="utf-8")
    with FAMILIES.scoped():
        probes.settings.registry.load_code(str(plugin))
        encoder = probes.load_encoder(str(folder))
        assert encoder.copying_scores("all", "ignore").shape == (2, 4)
        with pytest.raises(probes.InputError, match=r"^--copying-norms fold folds each layer's norms into the "
                                                    r"weights, .* the olmo family's entry gives none$"):
            probes.run(["induction"], encoder=encoder, corpus=corpus, copying_norms="fold", replicates=0,
                       progress=False)
