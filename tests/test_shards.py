"""Sharded runs and their merge (probes.running.state_files): `probes run --shard I/N --state DIR`, `probes merge`.

The merged shards give the unsharded run's results for every registered probe at N = 1, 2 and 7, on
the small real corpora of tests/probe_corpora.py: every count exactly, every score to float64
rounding (the shards' sums are added in another order: relative differences of 1e-15 are seen).
The runs go one sentence a batch: in a batch of several, a sentence's float32 attention depends on
the batch's padding at 1e-8 (as with another --batch-size), which moves the float-valued analyses
(entropy, head_distance) by that much; one sentence a batch isolates what the merge itself does.
Not compared: the batching settings (batch size, token budget, device), the per-sentence views, and
seg's "examples" (the sentences kept for `probes show`, no score), which each shard
keeps as its own first N sentences, numbered within the shard (a known gap: see docs/studies.md).
Merge refuses states that do not agree (another model, option, corpus file) naming the field, and
shards that overlap or are missing; a bad --shard exits 2 with one line; nothing is written on refusal.
"""
from __future__ import annotations

import hashlib
import json
import random
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

import probes
from probe_corpora import BUNDLED, CORPORA, LIMIT, excerpt
from probes.builtin.dep import DependencyProbe
from probes.base.checkpoint import weights_sha256
from probes.cli import main
from probes.corpus import read_corpus
from probes.base.defaults import bundled_corpus
from probes.encoding.identity import content_digest, sentence_key
from probes.base.provenance import sha256
from probes.base.argtypes import Shard, parse_shard
from probes.running.state_files import BATCHING, split
from tiny_models import build_tiny_model

SHARDS = (1, 2, 7)


# ---- the split ------------------------------------------------------------------------------------

def test_parse_shard():
    assert parse_shard("0/1") == Shard(0, 1) and parse_shard("6/7") == Shard(6, 7)
    for bad in ("2/2", "1/0", "-1/2", "a/b", "1", "0/2/3", "1.0/2", ""):
        with pytest.raises(probes.InputError, match="shard must be I/N"):
            parse_shard(bad)


def test_split_by_sentence_identity():
    """The key by its definition (probes.encoding.identity): SHA-256 of (SHA-256 of the JSON list of the words, the
    occurrence as 8 bytes); the split by key mod N, the same in another corpus order. The bundled sample
    repeats "( Laughter . )" four times and "( Applause . )" three times: numbered 0, 1, ... by their words."""
    sentences = read_corpus([bundled_corpus()]).sentences
    parts = [split(sentences, Shard(i, 7)) for i in range(7)]
    s = sentences[3]
    content = json.dumps(s.words, ensure_ascii=False, separators=(",", ":"))
    digest = hashlib.sha256(content.encode("utf-8")).digest()
    assert sentence_key(s) == int(hashlib.sha256(digest + bytes(8)).hexdigest(), 16)
    laughter = [x for x in sentences if x.words == ["(", "Laughter", ".", ")"]]
    assert [x.occurrence for x in laughter] == [0, 1, 2, 3] and len({sentence_key(x) for x in laughter}) == 4
    assert sentence_key(laughter[2]) == int(hashlib.sha256(content_digest(laughter[0]) + (2).to_bytes(8, "big"))
                                            .hexdigest(), 16)
    # every sentence in exactly one shard, each shard in corpus order, no shard empty on 100+ sentences
    assert sorted(id(x) for p in parts for x in p.sentences) == sorted(id(x) for x in sentences)
    assert all(p.sentences == [x for x in sentences if sentence_key(x) % 7 == i] for i, p in enumerate(parts))
    assert all(p.sentences for p in parts)
    # the shards' digests add up to the corpus digest
    total = sum(int(p.digest, 16) for p in parts) % (1 << 256)
    assert {p.corpus_digest for p in parts} == {f"{total:064x}"}
    # the same split in another corpus order: the same keys in each shard (identical sentences may trade
    # numbers, and so places, but not keys), the same digests
    keys = [sorted(sentence_key(x) for x in p.sentences) for p in parts]
    shuffled = sentences[:]
    random.Random(0).shuffle(shuffled)
    for i, p in enumerate(parts):
        again = split(shuffled, Shard(i, 7))
        assert (again.digest, again.corpus_digest) == (p.digest, p.corpus_digest)
        assert sorted(sentence_key(x) for x in again.sentences) == keys[i]


# ---- merged shards == the unsharded run, for every probe ------------------------------------------

def _same(a, b, where: str) -> None:
    """Equal structure; floats to float64 rounding (rtol 1e-12), everything else (counts, names) exactly."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), (where, a.keys(), b.keys())
        for k in a:
            _same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (np.ndarray, list, tuple)) and np.asarray(a).dtype.kind == "f":
        np.testing.assert_allclose(np.asarray(b, dtype=float), np.asarray(a, dtype=float), rtol=1e-12, atol=1e-15,
                                   equal_nan=True, err_msg=where)
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{i}]")
    elif isinstance(a, (float, np.floating)):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-15, equal_nan=True, err_msg=where)
    else:
        assert a == b and type(a) is type(b), (where, a, b)


def _reported(result) -> dict:
    """Everything a result reports but its provenance: counts, score grids, intervals and bootstrap replicates,
    baselines, extras, settings."""
    i = result.info
    return {"model": i.model, "corpus": i.corpus, "layers": i.layers, "heads": i.heads, "sentences": i.sentences,
            "skipped": i.skipped, "notes": i.notes, "options": result.options,
            # the token budget follows the machine's memory
            "settings": {k: v for k, v in i.settings.items() if k not in BATCHING},
            "labels": {k: _entry(v) for k, v in result.labels.items()}, "overall": _entry(result.overall),
            "replicates": result.replicates, "baselines": result.baselines, "extra": result.extra}


def _entry(entry) -> dict:
    """A label's count, grids (the intervals' among them) and best head with its interval."""
    return {"count": entry.count, "scores": entry.scores, **entry.grids(),
            "best": None if entry.best is None else vars(entry.best)}


@pytest.fixture(scope="module")
def sharded(minilm, tmp_path_factory, request):
    """probe -> (the unsharded run's results, {N: the merged results of its N shards}), one set of runs per
    corpus (every probe without its own corpus in one run), made on first use."""
    made: dict[str, tuple] = {}

    def get(name: str) -> tuple:
        group = name if name in CORPORA else "bundled"
        if group not in made:
            tmp = tmp_path_factory.mktemp(group)
            if group in CORPORA:
                names, kwargs = [name], CORPORA[name](tmp, lambda: request.getfixturevalue("shared_corpora"))
            else:
                names, kwargs = [n for n in probes.available() if n not in CORPORA], BUNDLED

            def run(**more):
                return probes.run(names, encoder=minilm, **{"limit": LIMIT, "batch_size": 1, "progress": False,
                                                            **kwargs, **more})

            whole = run(state=tmp / "1")  # the unsharded run, its states saved as shard 0 of 1
            merged = {1: probes.merge(tmp / "1")}
            for n in SHARDS[1:]:
                for i in range(n):
                    run(shard=(i, n), state=tmp / str(n))
                merged[n] = probes.merge(tmp / str(n))
            made[group] = whole, merged
        return made[group]

    return get


@pytest.mark.integration
@pytest.mark.parametrize("n", SHARDS)
@pytest.mark.parametrize("name", probes.available())
def test_merged_shards_give_the_unsharded_run(name, n, sharded):
    whole, merged = sharded(name)
    expected, result = whole[name], merged[n][name]
    assert expected.info.sentences > 0 and expected.overall.count > 0
    per_shard = [s["sentences"] for s in result.info.provenance["shards"]]
    assert len(per_shard) == n and sum(per_shard) == expected.info.sentences
    if n > 1:  # the sentences were really split
        assert sum(k > 0 for k in per_shard) > 1, per_shard
    reported = [_reported(expected), _reported(result)]
    for r in reported:  # seg's examples and the per-sentence views: each shard's first sentences (see the docstring)
        r["extra"] = {k: v for k, v in r["extra"].items() if k not in ("examples", "sentence_views")}
    _same(*reported, f"{name} N={n}")


# ---- refusals ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny(tiny_model, tmp_path_factory):
    """Two tiny BERTs of one shape and tokenizer, with other weights (seeds 0 and 1)."""
    return tiny_model("bert"), build_tiny_model("bert", tmp_path_factory.mktemp("tiny_bert_seed1"), seed=1)


def _shard(model: Path, shard: str, state: Path, **options) -> Path:
    probes.run(["dep"], model=str(model), limit=6, progress=False, shard=shard, state=state, **options)
    return state


def _refused(capsys, argv: list[str], out: Path, expected: str) -> None:
    assert main([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("probes: error: ") and expected in err, err
    assert not out.exists()


def test_state_files(tiny, tmp_path):
    """What a state file holds, read back with weights_only=True."""
    corpus = excerpt(Path(bundled_corpus()), 6, tmp_path / "six.conllu")
    _shard(tiny[0], "1/2", tmp_path / "s", corpus=str(corpus), subtypes=True)
    data = torch.load(tmp_path / "s" / "dep.1-of-2.state.pt", weights_only=True)
    fp = data["fingerprint"]
    assert (fp["probe"], fp["options"]["subtypes"], fp["shards"], data["shard"]) == ("dep", True, 2, 1)
    assert fp["options"] == DependencyProbe(1, 1, subtypes=True).config
    assert fp["model_weights_sha256"] == weights_sha256(str(tiny[0]))
    assert fp["corpus_sha256"] == [sha256(str(corpus))] and fp["corpus_sentences"] == 6
    assert (fp["pool"], fp["tokenize"], fp["limit"], fp["probes_version"]) == ("mean-sum", "words", 6,
                                                                              probes.__version__)
    mine = split(read_corpus([str(corpus)]).sentences, Shard(1, 2))
    assert data["digest"] == mine.digest  # the shard's sentences: scored, or skipped (too long for the tiny model)
    assert data["sentences"] + sum(data["skipped"].values()) == len(mine.sentences) and data["sentences"] > 0
    assert set(data["state"]) == set(probes.get_probe("dep")(2, 2).state_dict())


@pytest.mark.parametrize("change, field", [("model", "model_weights_sha256"), ("option", "options"),
                                           ("corpus", "corpus_sha256")])
def test_merge_refuses_states_that_differ(change, field, tiny, tmp_path, capsys):
    first = _shard(tiny[0], "0/2", tmp_path / "a")
    other = {"model": dict(model=tiny[1]), "option": dict(subtypes=True),
             "corpus": dict(corpus=str(excerpt(Path(bundled_corpus()), 6, tmp_path / "six.conllu")))}[change]
    second = _shard(other.pop("model", tiny[0]), "1/2", tmp_path / "b", **other)
    _refused(capsys, ["merge", str(first), str(second)], tmp_path / "out", f"cannot merge: {field} differs")
    with pytest.raises(probes.InputError, match=f"{field} differs"):
        probes.merge([first, second])


def test_merge_refuses_overlapping_and_missing_shards(tiny, tmp_path, capsys):
    a, b = _shard(tiny[0], "0/2", tmp_path / "a"), _shard(tiny[0], "1/2", tmp_path / "b")
    twice = tmp_path / "twice"
    shutil.copytree(a, twice)
    _refused(capsys, ["merge", str(a), str(b), str(twice)], tmp_path / "out", "shard 0/2 of dep given twice")
    _refused(capsys, ["merge", str(b)], tmp_path / "out", "shard 0 of 2 of dep missing")
    # a shard whose sentences are not its share of the corpus: its digest does not add up
    data = torch.load(a / "dep.0-of-2.state.pt", weights_only=True)
    data["digest"] = f"{int(data['digest'], 16) + 1:064x}"
    torch.save(data, twice / "dep.0-of-2.state.pt")
    _refused(capsys, ["merge", str(twice), str(b)], tmp_path / "out", "do not add up to the corpus")
    assert main(["merge", str(a), str(b), "--out", str(tmp_path / "out"), "--no-plots"]) == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["dep.csv", "dep.json"]


def test_merge_refuses_a_folder_or_file_given_twice(tiny, tmp_path, capsys, monkeypatch):
    """`probes merge st st`, the same folder under another name (./st, a symbolic link), or a folder and one
    of its files: one line naming the second path, exit 2, nothing written."""
    st = _shard(tiny[0], "1/2", _shard(tiny[0], "0/2", tmp_path / "st"))
    (tmp_path / "link").symlink_to(st)
    monkeypatch.chdir(tmp_path)
    state = st / "dep.0-of-2.state.pt"
    for argv, second in [(["st", "st"], "st/dep.0-of-2.state.pt"), (["st", "./st"], "st/dep.0-of-2.state.pt"),
                         (["st", "link"], "link/dep.0-of-2.state.pt"), ([str(st), str(state)], str(state))]:
        _refused(capsys, ["merge", *argv], tmp_path / "out",
                 f"probes: error: {second}: state file given twice (also as ")
        with pytest.raises(probes.InputError, match="given twice"):
            probes.merge(argv)
    assert main(["merge", "st", "--out", "out", "--no-plots"]) == 0  # the folder once: both shards, merged


@pytest.mark.parametrize("value", ["2/2", "1/0", "a/b", "3", "0/2/3"])
def test_bad_shard_exits_2_with_one_line(value, tmp_path, capsys):
    state = tmp_path / "state"
    assert main(["run", "dep", f"--shard={value}", "--state", str(state), "--limit", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "shard must be I/N" in err, err
    assert not state.exists()
