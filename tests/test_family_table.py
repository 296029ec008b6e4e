"""The family table (probes.families): the built-in families read the tiny models through their entries, and a
family added from a plugin file with only a table entry is read like a built-in one; a model of no family runs in
all-maps mode with a one-line warning, and what needs the table is refused naming it."""
from __future__ import annotations

import json
import shutil
import textwrap
import warnings

import pytest

import probes
from probes.families import FAMILIES, UnknownFamilyWarning, family_of

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
    from probes.families import Family, register_family

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
    with pytest.raises(probes.InputError, match=r"in no family of the table \(probes.families\)"):
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
