"""Fuzzing every corpus reader: whatever a file holds, reading it either works or raises InputError
(one line, naming a file, with a line number inside that file where it names one), never another
exception. The inputs are generic: any bytes, any text, a valid sample cut anywhere, with text
spliced in, or with the columns of some lines shuffled or dropped."""
from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reader_samples import SAMPLES, reader_format, write_sample

from probes.corpus import read_corpus
from probes.corpus.readers import BUILTIN_READERS
from probes.base.errors import InputError

FUZZ = settings(max_examples=50, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _spacy_ready() -> bool:
    try:
        import spacy

        from probes.corpus.spacy_text import DEFAULT_PIPELINES
    except ImportError:
        return False
    return any(spacy.util.is_package(name) for name in DEFAULT_PIPELINES)


NAMES = [pytest.param(n, marks=pytest.mark.skipif(not _spacy_ready(), reason="no spaCy pipeline installed"))
         if n == "spacy" else n for n in sorted(SAMPLES)]


def test_every_builtin_reader_is_fuzzed():
    assert set(BUILTIN_READERS) <= set(SAMPLES)


def read_with(name: str, replace: dict[str, bytes]) -> None:
    """Read sample `name` with some of its files replaced; fail on anything but a well-formed InputError."""
    with tempfile.TemporaryDirectory() as folder:
        paths = write_sample(Path(folder), name, replace)
        try:
            read_corpus(paths, reader_format(name))
        except InputError as e:
            message = str(e)
            assert "\n" not in message and "\r" not in message, message
            assert e.path is not None, message
            if e.line is not None:
                path = Path(e.path)
                assert path.is_file(), message
                data = path.read_bytes()
                assert 1 <= e.line <= data.count(b"\n") + data.count(b"\r") + 1, message


files_of = {name: sorted(files) for name, (files, _) in SAMPLES.items()}


@pytest.mark.parametrize("name", NAMES)
@FUZZ
@given(data=st.data(), junk=st.binary(max_size=600))
def test_any_bytes(name, data, junk):
    read_with(name, {data.draw(st.sampled_from(files_of[name])): junk})


@pytest.mark.parametrize("name", NAMES)
@FUZZ
@given(data=st.data(), text=st.text(max_size=300))
def test_any_text(name, data, text):
    read_with(name, {data.draw(st.sampled_from(files_of[name])): text.encode("utf-8")})


@pytest.mark.parametrize("name", NAMES)
@FUZZ
@given(data=st.data())
def test_truncated(name, data):
    rel = data.draw(st.sampled_from(files_of[name]))
    original = SAMPLES[name][0][rel]
    read_with(name, {rel: original[:data.draw(st.integers(0, len(original)))]})


@pytest.mark.parametrize("name", NAMES)
@FUZZ
@given(data=st.data(), insert=st.text(min_size=1, max_size=20))
def test_text_spliced_in(name, data, insert):
    rel = data.draw(st.sampled_from(files_of[name]))
    text = SAMPLES[name][0][rel].decode("utf-8")
    at = data.draw(st.integers(0, len(text)))
    read_with(name, {rel: (text[:at] + insert + text[at:]).encode("utf-8")})


@pytest.mark.parametrize("name", NAMES)
@FUZZ
@given(data=st.data())
def test_columns_shuffled_or_dropped(name, data):
    # columns: tab-separated where a line has a tab, else blank-separated (tokens, XML attributes)
    rel = data.draw(st.sampled_from(files_of[name]))
    lines = SAMPLES[name][0][rel].decode("utf-8").split("\n")
    for i in sorted(data.draw(st.sets(st.integers(0, len(lines) - 1), min_size=1, max_size=4))):
        sep = "\t" if "\t" in lines[i] else " "
        cols = lines[i].split(sep)
        order = data.draw(st.permutations(cols))
        lines[i] = sep.join(order[:data.draw(st.integers(0, len(order)))])
    read_with(name, {rel: "\n".join(lines).encode("utf-8")})


def test_a_stray_carriage_return_stays_escaped_in_the_message():
    """Found by test_text_spliced_in: a CR inside an IOB2 tag ("B-O\rRG") was quoted into the error raw, so the
    message broke in two on a terminal; InputError writes line breaks it quotes as escapes."""
    text = SAMPLES["iob2"][0]["c.iob2"].decode("utf-8")
    at = text.index("B-ORG") + 3
    with tempfile.TemporaryDirectory() as folder:
        paths = write_sample(Path(folder), "iob2", {"c.iob2": (text[:at] + "\r" + text[at:]).encode("utf-8")})
        with pytest.raises(InputError) as e:
            read_corpus(paths, "iob2")
    assert "\r" not in str(e.value) and "B-O\\rRG" in str(e.value)
