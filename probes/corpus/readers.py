"""The corpus-reader registry: the built-in formats and the entry-point group ``probes.readers``.

A reader is a callable ``reader(path, **options) -> Corpus``; its keyword parameters are the
reader options it takes (``read_corpus`` passes each reader only the options it names). A
package adds a format without editing this one by declaring an entry point whose name is the
format name::

    [project.entry-points."probes.readers"]
    myformat = "my_pkg.reader:read_myformat"

and ``--format myformat`` (``probes.run(..., format="myformat")``) reads with it. Built-in names
win over entry points of the same name. An entry point is loaded only when its format is used,
so a broken plugin does not stop the others.
"""
from __future__ import annotations

from typing import Callable

from probes.corpus.sentence import Corpus
from probes.base.errors import InputError
from probes.base.registries import Registry

ENTRY_POINT_GROUP = "probes.readers"

Reader = Callable[..., Corpus]

# format name -> its reader(path, **options) -> Corpus, as "module:function" (imported when first used)
BUILTIN_READERS: dict[str, str] = {
    "conllu": "probes.corpus.conllu_reader:read_conllu",
    "propbank": "probes.corpus.propbank:read_propbank",
    "conll2012": "probes.corpus.conll2012:read_conll2012",
    "framenet": "probes.corpus.framenet:read_framenet",
    "segmented": "probes.corpus.segmented:read_segmented",  # SIGHAN: one sentence a line, words separated by blanks
    "iob2": "probes.corpus.iob2:read_iob2",  # Universal NER: ID FORM TAG - annotator
    "ptb": "probes.corpus.ptb:read_ptb",  # Penn-Treebank bracketed trees
    "craft": "probes.corpus.craft:read_craft_list",  # a CRAFT ids file: its listed articles' penn/<id>.tree
    "spacy": "probes.corpus.spacy_text:read_spacy",  # raw text, one passage a line, annotated by spaCy (--annotate)
    "pairs": "probes.corpus.pairs:read_pairs",  # sentence pairs: sentence1<TAB>sentence2[<TAB>label]
    "token_ids": "probes.corpus.token_ids:read_token_ids",  # one sequence of token ids a line (causal detectors)
    "coref": "probes.corpus.coref:read_coref",  # CoNLL-2012 coreference column (LitBank, OntoNotes): one per document
}


def _reader_function(name: str, obj: object, value: str) -> Reader:
    if not callable(obj):
        raise InputError(f"corpus format {name!r}: {value} is not a reader function")
    return obj


READERS: Registry[Reader] = Registry("corpus format", ENTRY_POINT_GROUP, BUILTIN_READERS, check=_reader_function)

_CONLLU = {"head": "HEAD, column 7", "deprel": "DEPREL, column 8", "upos": "UPOS, column 4", "xpos": "XPOS, column 5"}
_TREES = {"xpos": "the preterminal tags", "constituents": "the bracketed phrases"}
# format name -> {annotation (a Sentence.ann key, as probes name what they need): where the file holds it}
GIVES: dict[str, dict[str, str]] = {
    "conllu": {**_CONLLU, "ner": "MISC NER=<IOB2 tag>"},
    "propbank": {**_CONLLU, "srl": "Universal PropBank: column 11 each predicate's roleset, then one column of "
                                   "roles per predicate"},
    "conll2012": {"ner": "CoNLL-2012: the named-entity column 10", "srl": "CoNLL-2012: one column per predicate "
                                                                          "from column 11"},
    "framenet": {"frames": "FrameNet full-text XML: frames with their target and frame elements"},
    "iob2": {"ner": "the IOB2 TAG column"},
    "ptb": _TREES,
    "craft": _TREES,
    "spacy": {key: "spaCy's silver annotation of raw text" for key in ("head", "deprel", "upos", "xpos", "ner")},
    "pairs": {"pair": "sentence1<TAB>sentence2[<TAB>label]"},
    "token_ids": {"token_ids": "one sequence of token ids a line"},
    "coref": {"mentions": "CoNLL-2012: the last column's coreference brackets, one document at a time"},
}


def formats_giving(annotation: str) -> str | None:
    """The built-in formats whose reader gives `annotation`, with where each file holds it ("propbank (Universal
    PropBank: ...) or conll2012 (...)"); None where no reader gives it."""
    found = [f"{name} ({gives[annotation]})" for name, gives in GIVES.items() if annotation in gives]
    return " or ".join(found) or None


def reader_names() -> list[str]:
    """Every format name: the built-ins, then the entry points' (sorted), without loading any plugin."""
    return READERS.names()


def get_reader(name: str) -> Reader:
    """The reader of format `name`; InputError listing the available formats for an unknown one, or
    naming the entry point that cannot be loaded."""
    return READERS.get(name)
