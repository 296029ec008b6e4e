"""Bounded chunked reading (probes.running.chunks, probes.corpus.iter_corpus / CorpusStream, the streaming readers).

A run read in many tiny chunks (CHUNK_SENTENCES monkeypatched) gives the results of the same run read as
one chunk: every count identical, every score within 1e-6 (float32 batching), the same per-sentence views,
shards and merge too. The streaming text reader gives the lines and the errors of a whole-file decode
(an independent reference here), and the streaming corpus readers yield sentences before the file is read
to its end, with counts filled as they go.
"""
from __future__ import annotations

import warnings
from unittest import mock
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from probe_corpora import excerpt, grids, same

import probes
from probes.running import chunks
from probes.corpus import CorpusStream, iter_corpus, read_corpus, streams
from probes.corpus.conllu_reader import iter_conllu
from probes.corpus.iob2 import iter_iob2
from probes.corpus.propbank import iter_propbank
from probes.corpus.sentence import Corpus, Sentence
from probes.corpus import textio
from probes.corpus.textio import iter_text_lines
from probes.base.defaults import bundled_corpus
from probes.encoding.subwords import UnknownWords, encode, unknown_words
from probes.base.errors import InputError
from probes.base.argtypes import Shard
from probes.running.state_files import ShardStream, split

DATA = Path(__file__).parent / "data"
TINY = 7  # sentences a chunk in the chunked runs: every corpus below is several chunks


def reference_lines(data: bytes) -> list[str]:
    """What a whole-file read gives: the text decoded at once, BOM dropped, CR LF as LF, split on LF."""
    text = data.decode("utf-8")
    return (text[1:] if text.startswith("\ufeff") else text).replace("\r\n", "\n").split("\n")


def reference_error(data: bytes) -> tuple[str, int | None] | None:
    """The error of a whole-file read (problem, line): empty, then a NUL byte anywhere, then bad UTF-8."""
    if not data.strip():
        return "file is empty", None
    if b"\x00" in data:
        return "binary data (NUL byte), not a text corpus file", data.count(b"\n", 0, data.find(b"\x00")) + 1
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        return f"not UTF-8 text (byte 0x{data[e.start]:02x})", data.count(b"\n", 0, e.start) + 1
    return None


@settings(max_examples=200, deadline=None, database=None)
@given(st.lists(st.sampled_from([b"a\tb", b"", b" ", b"\r", b"\n", b"\r\n", b"\xc3\xa9", b"\xe2\x82", b"\x00",
                                 b"\xef\xbb\xbf", b"# x = y", b"\xff"]), max_size=12))
def test_streamed_lines_and_errors_are_a_whole_reads(tmp_path_factory, parts):
    data = b"".join(parts)
    path = tmp_path_factory.mktemp("lines") / "f.txt"
    path.write_bytes(data)
    expected = reference_error(data)
    for block in (1, 2, 3, 5, textio.BLOCK):  # blocks that cut lines, characters and CR LF pairs, and the default
        with mock.patch.object(textio, "BLOCK", block):
            if expected is None:
                assert list(iter_text_lines(path)) == reference_lines(data)
            else:
                with pytest.raises(InputError) as e:
                    list(iter_text_lines(path))
                assert (e.value.problem, e.value.line) == expected


def test_a_later_error_is_found_before_the_first_line(tmp_path):
    # the bytes are checked first: a NUL byte on line 3 is the error, not the malformed row on line 1
    path = tmp_path / "c.conllu"
    path.write_bytes(b"1\tbad\n\n1\tx\n\x00\n")
    with pytest.raises(InputError) as e:
        next(iter_conllu(path))
    assert (e.value.problem, e.value.line) == ("binary data (NUL byte), not a text corpus file", 4)


SENTENCE = "# sent_id = s{}\n1\tDogs\tdog\tNOUN\tNNS\t_\t2\tnsubj\t_\t_\n2\tbark\tbark\tVERB\tVB\t_\t0\troot\t_\t_\n\n"
CYCLE = ("# sent_id = c{}\n1\tA\ta\tX\tX\t_\t2\tdep\t_\t_\n2\tB\tb\tX\tX\t_\t1\tdep\t_\t_\n"
         "3\tC\tc\tX\tX\t_\t0\troot\t_\t_\n\n")


def test_conllu_streams_sentences_and_counts_as_it_goes(tmp_path):
    path = tmp_path / "c.conllu"
    path.write_text(SENTENCE.format(1) + CYCLE.format(1) + SENTENCE.format(2) + "1\tonly five\tcols\t_\t_\n\n",
                    encoding="utf-8")
    counts = Corpus(sentences=[], files=[])
    stream = iter_conllu(path, counts, invalid_trees="skip")
    assert next(stream).sent_id == "s1" and counts.files == [str(path)] and counts.skipped == {}
    assert next(stream).sent_id == "s2"  # the cycle between them set aside and counted on the way
    assert counts.skipped == {"invalid_tree_cycle": 1} and counts.skipped_ids == {"invalid_tree_cycle": ["c1"]}
    with pytest.raises(InputError) as e:  # the malformed last sentence: an error only when it is reached
        next(stream)
    assert (e.value.line, e.value.problem) == (14, "expected 10 tab-separated columns, found 5")


@pytest.mark.parametrize("reader, name", [(iter_propbank, "sample_up.conllu"), (iter_iob2, None)])
def test_the_streaming_readers_give_the_whole_readers_sentences(tmp_path, reader, name):
    if name is None:
        path = tmp_path / "u.iob2"
        path.write_text("# sent_id = a\n1\tKim\tB-PER\t-\t-\n2\tran\tO\t-\t-\n\n1\tParis\tB-LOC\t-\t-\n\n",
                        encoding="utf-8")
        fmt = "iob2"
    else:
        path, fmt = DATA / name, "propbank"
    whole = read_corpus([path], fmt)
    counts = Corpus(sentences=[], files=[])
    streamed = list(reader(path, counts))
    assert [(s.words, s.ann, s.sent_id, s.line) for s in streamed] == \
        [(s.words, s.ann, s.sent_id, s.line) for s in whole.sentences]
    assert len(streamed) >= 2 and counts.files == whole.files == [str(path)]


def test_iter_corpus_over_files_and_formats():
    ewt = bundled_corpus()
    whole = read_corpus([ewt, ewt])
    counts = Corpus(sentences=[], files=[])
    streamed = list(iter_corpus([ewt, ewt], counts=counts))
    assert [s.words for s in streamed] == [s.words for s in whole.sentences]
    assert counts.files == whole.files and streams([ewt])
    # a format without a streaming reader (CoNLL-2012) is read whole and yielded, with its reader's counts
    conll = DATA / "sample.conll2012"
    assert not streams([conll], "conll2012")
    counts = Corpus(sentences=[], files=[])
    read = read_corpus([conll], "conll2012")
    assert [s.words for s in iter_corpus([conll], "conll2012", counts=counts)] == [s.words for s in read.sentences]
    assert (counts.files, counts.skipped, counts.notes) == (read.files, read.skipped, read.notes)


def test_corpus_stream_limit_keeps_whole_file_counts(tmp_path):
    path = tmp_path / "c.conllu"
    path.write_text(SENTENCE.format(1) + SENTENCE.format(2) + CYCLE.format(1) + SENTENCE.format(3), encoding="utf-8")
    stream = CorpusStream([path], limit=2, invalid_trees="skip")
    assert stream.counts is None
    assert [s.sent_id for s in stream] == ["s1", "s2"]
    # the first pass read on past the limit: the reader's counts are those of the whole file, as read_corpus's
    assert stream.counts.skipped == read_corpus([path], invalid_trees="skip").skipped == {"invalid_tree_cycle": 1}
    assert [s.sent_id for s in stream] == ["s1", "s2"]  # a pass reads the file again


def test_the_streamed_split_is_the_split():
    sentences = read_corpus([bundled_corpus()]).sentences
    for i in range(3):
        whole = split(sentences, Shard(i, 3))
        stream = ShardStream(Shard(i, 3))
        mine = list(stream.select(iter(sentences)))
        got = stream.split()
        assert [id(s) for s in mine] == [id(s) for s in whole.sentences] and got.sentences == []
        assert (got.digest, got.corpus_digest, got.corpus_sentences) == \
            (whole.digest, whole.corpus_digest, whole.corpus_sentences)


def test_unknown_words_add_up_over_chunks(minilm):
    tokenizer = minilm.tokenizer
    # 🦜, 🦩, ☃ and ⛵ are not in MiniLM's vocabulary: [UNK]
    sentences = [Sentence(words=w) for w in (["the", "🦜"], ["ok"], ["🦜", "🦩"], ["☃", "a", "⛵"], ["🦩"])]
    encoded, _ = encode(tokenizer, sentences, 512)
    whole = unknown_words(tokenizer.unk_token_id, sentences, encoded)
    assert (whole.count, whole.words, whole.examples) == (6, 9, ["🦜", "🦩", "☃"])
    for cut in range(len(sentences) + 1):
        parts = []
        for part in (sentences[:cut], sentences[cut:]):
            enc, _ = encode(tokenizer, part, 512)
            parts.append(unknown_words(tokenizer.unk_token_id, part, enc))
        added = parts[0] + parts[1]
        assert (added.count, added.words, added.examples) == (whole.count, whole.words, whole.examples), cut
    assert (UnknownWords(0, 0, []) + whole).examples == whole.examples


def chunked_and_whole(monkeypatch, names, **kwargs) -> tuple[dict, dict]:
    """The same run read as one chunk and in chunks of TINY sentences."""
    whole = probes.run(names, **kwargs)
    monkeypatch.setattr(chunks, "CHUNK_SENTENCES", TINY)
    chunked = probes.run(names, **kwargs)
    monkeypatch.undo()
    return whole, chunked


def assert_same_runs(whole: dict, chunked: dict, sentences: int) -> None:
    assert whole.keys() == chunked.keys()
    for name in whole:
        a, b = whole[name], chunked[name]
        assert a.info.sentences == b.info.sentences >= sentences, name
        same(grids(a), grids(b), name)
        assert a.info.provenance["unknown_words"] == b.info.provenance["unknown_words"], name
        assert a.info.corpus == b.info.corpus and a.info.notes == b.info.notes, name


def test_tiny_chunks_score_as_one_chunk(monkeypatch, minilm):
    # dep, rare (its word frequencies a streamed pre-pass), pos fitted on the same corpus (a pass of its own
    # over the chunks); 60 sentences of the EWT sample in chunks of 7; views of the first 12 sentences
    kwargs = dict(encoder=minilm, limit=60, fit_on="same", views=12, view_heads=[(1, 2)], max_tokens=4096)
    whole, chunked = chunked_and_whole(monkeypatch, ["dep", "rare", "pos"], **kwargs)
    assert_same_runs(whole, chunked, 55)
    views = whole["dep"].extra["sentence_views"]["sentences"]
    assert [v["index"] for v in views] == list(range(12))  # every sentence of the sample's first 12 scored
    assert whole["pos"].info.settings["fit"] == chunked["pos"].info.settings["fit"]
    assert whole["pos"].info.settings["fit"]["sentences"] == whole["pos"].info.sentences


def test_tiny_chunks_with_skips_a_fit_corpus_and_raw_text(monkeypatch, minilm, shared_corpora, tmp_path):
    # seg reads raw text (GSDSimp); ner fits on a separate UNER file and skips nothing; dep with a model limit
    # of 24 subwords skips the long sentences of the EWT sample, counted across the chunks
    gsd = excerpt(shared_corpora / "ud-chinese-gsdsimp" / "zh_gsdsimp-ud-test.conllu", 30, tmp_path / "gsd.conllu")
    whole, chunked = chunked_and_whole(monkeypatch, ["seg"], encoder=minilm, corpus=gsd, tokenize="text")
    assert_same_runs(whole, chunked, 20)
    uner = shared_corpora / "uner-english-ewt"
    fit = excerpt(uner / "en_ewt-ud-test.iob2", 30, tmp_path / "test.iob2")
    scored = excerpt(uner / "en_ewt-ud-dev.iob2", 30, tmp_path / "dev.iob2")
    whole, chunked = chunked_and_whole(monkeypatch, ["ner"], encoder=minilm, corpus=scored, fit=fit)
    assert_same_runs(whole, chunked, 20)
    assert whole["ner"].info.settings["fit"]["sentences"] == 30
    short = probes.load_encoder(max_length=24)
    whole, chunked = chunked_and_whole(monkeypatch, ["dep"], encoder=short, limit=50)
    assert_same_runs(whole, chunked, 10)
    assert whole["dep"].info.skipped["too_long"] == chunked["dep"].info.skipped["too_long"] > 10


def test_tiny_chunks_shard_and_merge(monkeypatch, minilm, tmp_path):
    kwargs = dict(encoder=minilm, limit=40, fit_on="same", views=0)  # a merge keeps no per-sentence views
    whole = probes.run(["dep", "pos"], **kwargs)
    monkeypatch.setattr(chunks, "CHUNK_SENTENCES", TINY)
    for i in range(2):
        probes.run(["dep", "pos"], shard=(i, 2), state=tmp_path / "state", **kwargs)
    merged = probes.merge(tmp_path / "state")
    for name in whole:
        same(grids(whole[name]), grids(merged[name]), name)


def test_nothing_scored_across_chunks(monkeypatch, minilm):
    # a model limit of 3 subwords leaves no sentence: refused after every chunk is read, with every count
    monkeypatch.setattr(chunks, "CHUNK_SENTENCES", TINY)
    with pytest.raises(InputError) as e:
        probes.run(["dep"], encoder=probes.load_encoder(max_length=3), limit=30)
    assert e.value.problem == "no sentence can be scored (of 30: 30 too long; model limit 3 subwords)"


def test_unknown_word_warning_counts_every_chunk(monkeypatch, minilm, tmp_path):
    path = tmp_path / "birds.conllu"
    rows = "".join(SENTENCE.replace("Dogs", "🦜").format(i) for i in range(20))
    path.write_text(rows, encoding="utf-8")
    monkeypatch.setattr(chunks, "CHUNK_SENTENCES", TINY)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = probes.run(["dep"], encoder=minilm, corpus=path)["dep"]
    assert result.info.provenance["unknown_words"] == {"count": 20, "words": 40, "share": 0.5, "unknown_units": 20,
                                                       "units": 40, "unit_share": 0.5, "dominated": True,
                                                       "only_unknown": 20, "only_share": 0.5}
    assert [str(w.message).split(" (")[0] for w in caught if "unknown token" in str(w.message)] == \
        ["the unknown token dominates this run: 50.0% of the words' subword tokens"]


def _unreadable(path: Path, sentences: int, readable: int) -> Path:
    """`sentences` two-word sentences, the first `readable` of them "Dogs bark", the others "🦜 🦩" (MiniLM: [UNK])."""
    rows = [SENTENCE.format(i) if i < readable else SENTENCE.format(i).replace("Dogs", "🦜").replace("bark", "🦩")
            for i in range(sentences)]
    path.write_text("".join(rows), encoding="utf-8")
    return path


def test_a_corpus_mostly_of_unknown_words_is_refused_before_any_forward_pass(monkeypatch, minilm, tmp_path):
    """One chunk: refused once it is tokenised (issue 42 item 6), so no pass runs; 11 of 20 words unknown is above
    the half, 10 of 20 is not."""
    path = _unreadable(tmp_path / "birds.conllu", 10, 4)  # 12 of 20 words unknown
    monkeypatch.setattr(type(minilm), "forward", lambda *a, **k: pytest.fail("a forward pass ran"))
    with pytest.raises(InputError) as e:
        probes.run(["dep"], encoder=minilm, corpus=path)
    assert str(e.value) == (f"{path}: 60.0% of the words (12 of 20) tokenize only to the unknown token, e.g. 🦜, 🦩: "
                            "the model cannot read this corpus; give --allow-unknown (allow_unknown=True) to score it "
                            "anyway")
    monkeypatch.undo()
    half = _unreadable(tmp_path / "half.conllu", 10, 5)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert probes.run(["dep"], encoder=minilm, corpus=half)["dep"].info.sentences == 10


def test_a_corpus_of_unknown_words_is_scored_with_allow_unknown(monkeypatch, minilm, tmp_path):
    """allow_unknown (the API's keyword, RunSettings' field) scores it, after the warning; across chunks the
    refusal comes once every chunk is read, on the whole corpus' share."""
    path = _unreadable(tmp_path / "birds.conllu", 20, 0)
    monkeypatch.setattr(chunks, "CHUNK_SENTENCES", TINY)
    with pytest.raises(InputError, match=r"100\.0% of the words \(40 of 40\) tokenize only to the unknown token"):
        probes.run(["dep"], encoder=minilm, corpus=path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = probes.run(["dep"], settings=probes.RunSettings(allow_unknown=True), encoder=minilm,
                            corpus=path)["dep"]
    assert result.info.sentences == 20 and result.info.settings["allow_unknown"] is True
    assert result.info.provenance["unknown_words"]["only_share"] == 1.0
    assert [str(w.message).split(":")[0] for w in caught if "unknown token" in str(w.message)] == \
        ["the unknown token dominates this run"]
