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

from importlib.metadata import entry_points
from typing import Callable

from probes.corpus.conll2012 import read_conll2012
from probes.corpus.conllu_reader import read_conllu
from probes.corpus.coref import read_coref
from probes.corpus.craft import read_craft_list
from probes.corpus.framenet import read_framenet
from probes.corpus.iob2 import read_iob2
from probes.corpus.pairs import read_pairs
from probes.corpus.propbank import read_propbank
from probes.corpus.ptb import read_ptb
from probes.corpus.segmented import read_segmented
from probes.corpus.sentence import Corpus
from probes.corpus.spacy_text import read_spacy
from probes.errors import InputError

ENTRY_POINT_GROUP = "probes.readers"

Reader = Callable[..., Corpus]

# format name -> reader(path, **options) -> Corpus
BUILTIN_READERS: dict[str, Reader] = {
    "conllu": read_conllu,
    "propbank": read_propbank,
    "conll2012": read_conll2012,
    "framenet": read_framenet,
    "segmented": read_segmented,  # SIGHAN: one sentence a line, words separated by blanks
    "iob2": read_iob2,  # Universal NER: ID FORM TAG - annotator
    "ptb": read_ptb,  # Penn-Treebank bracketed trees
    "craft": read_craft_list,  # a CRAFT ids file (craft-ids-test.txt): the listed articles' penn/<id>.tree
    "spacy": read_spacy,  # raw text, one passage a line, annotated by spaCy (--annotate spacy)
    "pairs": read_pairs,  # sentence pairs: sentence1<TAB>sentence2[<TAB>label]
    "coref": read_coref,  # CoNLL-2012 coreference column (LitBank, OntoNotes): one Sentence per document
}

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
    "coref": {"mentions": "CoNLL-2012: the last column's coreference brackets, one document at a time"},
}


def formats_giving(annotation: str) -> str | None:
    """The built-in formats whose reader gives `annotation`, with where each file holds it ("propbank (Universal
    PropBank: ...) or conll2012 (...)"); None where no reader gives it."""
    found = [f"{name} ({gives[annotation]})" for name, gives in GIVES.items() if annotation in gives]
    return " or ".join(found) or None


def reader_names() -> list[str]:
    """Every format name: the built-ins, then the entry points' (sorted), without loading any plugin."""
    plugins = sorted({ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)} - set(BUILTIN_READERS))
    return list(BUILTIN_READERS) + plugins


def get_reader(name: str) -> Reader:
    """The reader of format `name`; InputError listing the available formats for an unknown one, or
    naming the entry point that cannot be loaded."""
    reader = BUILTIN_READERS.get(name)
    if reader is not None:
        return reader
    found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
    if not found:
        raise InputError(f"unknown corpus format {name!r}; available: {', '.join(reader_names())}")
    try:
        reader = found[0].load()
    except (ImportError, AttributeError) as e:  # the plugin's installation, not a bug here
        raise InputError(f"corpus format {name!r}: cannot load {found[0].value} ({type(e).__name__}: {e})") from None
    if not callable(reader):
        raise InputError(f"corpus format {name!r}: {found[0].value} is not a reader function")
    return reader
