"""FrameNet 1.7 full-text reader (``fulltext/*.xml`` + ``frame/*.xml``).

    corpus = read_framenet("corpora/framenet-1.7", documents=STANDARD_TEST_DOCUMENTS,
                           allow_missing=True)

One Sentence per fulltext ``<sentence>``:

- ``words``: the sentence text split into PTB-style words by
  :func:`probes.corpus.ptb_words.ptb_word_spans` (whitespace, then punctuation and clitics such
  as ``n't 's 're`` split off). Spans are mapped to words
  through character offsets only, never by searching for strings.
- ``ann["text"]``: the sentence text exactly as in the XML; ``ann["offsets"]``: one
  ``(start, end_exclusive)`` character span per word.
- ``ann["frames"]``: one dict per annotation set that names a frame (``frameName``) and has a
  Target layer with at least one label::

      {"frame": "Giving", "lu": "contribution.n", "target": [1],
       "fes": [{"name": "Donor", "core": True, "coreType": "Core", "words": [0]}, ...]}

  ``target`` and FE ``words`` are sorted 0-based word indices: every word overlapping the
  label's character span ``[start, end]`` (end inclusive, as in FrameNet). All Target labels
  of the set are united (discontinuous targets such as phrasal verbs). FEs come from the
  rank-1 FE layer; the labels of one FE name in one set (a discontinuous FE, e.g. "I 'd ...
  finished high school") are united into one entry, in order of first appearance. ``core`` is
  true for coreType "Core" and "Core-Unexpressed", read from ``frame/<frame>.xml``.
- ``sent_id`` = ``"<document>#<sentence ID>"``; ``source`` = the XML path; ``line`` = line of
  the ``<sentence>`` element.

Counted in ``corpus.skipped`` (never silently dropped):

- ``null_instantiation``: FE labels without offsets with itype CNI, DNI or INI;
- ``incorporated_fe``: FE labels with itype INC (the FE is incorporated in the target word, so
  it has no span of its own);
- ``frame_without_target``: frame annotation sets whose Target layer has no label;
- ``empty_sentence``: sentences whose text is empty or blank;
- ``missing_document``: with ``allow_missing=True``, requested documents that are not there.

Errors are :class:`InputError` naming the file and line: malformed XML, offsets outside the
sentence text (the label's line), a frame with no ``frame/<name>.xml`` (the annotation set's
line in the fulltext file, and the missing path), unknown document names.
"""
from __future__ import annotations

from bisect import bisect_right
from pathlib import Path
from xml.parsers import expat

from probes.corpus.ptb_words import ptb_word_spans
from probes.corpus.sentence import Corpus, Sentence
from probes.corpus.textio import read_file_bytes, read_text_lines
from probes.base.errors import InputError

__all__ = [
    "STANDARD_TEST_DOCUMENTS",
    "STANDARD_DEV_DOCUMENTS",
    "read_framenet",
    "read_document_list",
]

# The standard FrameNet 1.5/1.7 full-text test and dev documents (Das et al. 2014 split, as
# used by open-sesame, Swayamdipta et al. 2017, and most later frame-semantic parsers).
# Source: swabhs/open-sesame, sesame/globalconfig.py (TEST_FILES, DEV_FILES), commit 0dc612b9,
# with the ".xml" suffix removed. Note: the copy in ../shared/corpora/framenet-1.7 lacks
# ANC__WhereToHongKong; pass allow_missing=True to read the other 22 test documents there.
STANDARD_TEST_DOCUMENTS: tuple[str, ...] = (
    "ANC__110CYL067",
    "ANC__110CYL069",
    "ANC__112C-L013",
    "ANC__IntroHongKong",
    "ANC__StephanopoulosCrimes",
    "ANC__WhereToHongKong",
    "KBEval__atm",
    "KBEval__Brandeis",
    "KBEval__cycorp",
    "KBEval__parc",
    "KBEval__Stanford",
    "KBEval__utd-icsi",
    "LUCorpus-v0.3__20000410_nyt-NEW",
    "LUCorpus-v0.3__AFGP-2002-602187-Trans",
    "LUCorpus-v0.3__enron-thread-159550",
    "LUCorpus-v0.3__IZ-060316-01-Trans-1",
    "LUCorpus-v0.3__SNO-525",
    "LUCorpus-v0.3__sw2025-ms98-a-trans.ascii-1-NEW",
    "Miscellaneous__Hound-Ch14",
    "Miscellaneous__SadatAssassination",
    "NTI__NorthKorea_Introduction",
    "NTI__Syria_NuclearOverview",
    "PropBank__AetnaLifeAndCasualty",
)
STANDARD_DEV_DOCUMENTS: tuple[str, ...] = (
    "ANC__110CYL072",
    "KBEval__MIT",
    "LUCorpus-v0.3__20000415_apw_eng-NEW",
    "LUCorpus-v0.3__ENRON-pearson-email-25jul02",
    "Miscellaneous__Hijack",
    "NTI__NorthKorea_NuclearOverview",
    "NTI__WMDNews_062606",
    "PropBank__TicketSplitting",
)

CORE_TYPES = frozenset({"Core", "Core-Unexpressed"})
_NULL_ITYPES = frozenset({"CNI", "DNI", "INI"})


# --------------------------------------------------------------------------- XML reading


_LOCAL_NAMES: dict[str, str] = {}


def _local(name: str) -> str:
    """'{namespace}tag' (expat with namespace_separator="}") -> 'tag', cached."""
    local = _LOCAL_NAMES.get(name)
    if local is None:
        local = _LOCAL_NAMES[name] = name.rpartition("}")[2]
    return local


def _parse_xml(path: Path, handler) -> None:
    """Run expat over ``path``, calling ``handler.start(tag, attrs)`` / ``handler.end(tag)``
    with namespace-free tag names (``handler.parser`` is set for line numbers and for
    installing a character-data handler). Unreadable or malformed files -> InputError."""
    data = read_file_bytes(path)
    parser = expat.ParserCreate(namespace_separator="}")
    parser.buffer_text = True
    handler.parser = parser
    names = _LOCAL_NAMES
    start, end = handler.start, handler.end
    parser.StartElementHandler = lambda name, attrs: start(names.get(name) or _local(name), attrs)
    parser.EndElementHandler = lambda name: end(names.get(name) or _local(name))
    try:
        parser.Parse(data, True)
    except expat.ExpatError as e:
        raise InputError(
            f"malformed XML: {expat.ErrorString(e.code)} (column {e.offset + 1})", path, e.lineno
        ) from None


class _FrameFile:
    """Handlers collecting {FE name: coreType} from the frame's own <FE> children."""

    def __init__(self):
        self.fes: dict[str, str] = {}
        self.depth = 0

    def start(self, name: str, attrs: dict[str, str]) -> None:
        self.depth += 1
        if name == "FE" and self.depth == 2:  # <frame><FE>, not FEs mentioned deeper down
            self.fes[attrs.get("name", "")] = attrs.get("coreType", "")

    def end(self, name: str) -> None:
        self.depth -= 1


class _FrameLexicon:
    """FE name -> coreType per frame, read lazily from frame/<name>.xml and cached."""

    def __init__(self, frame_dir: Path):
        self.frame_dir = frame_dir
        self._cache: dict[str, dict[str, str]] = {}

    def core_types(self, frame: str, needed_by: Path, line: int) -> dict[str, str]:
        fes = self._cache.get(frame)
        if fes is not None:
            return fes
        path = self.frame_dir / f"{frame}.xml"
        if not path.is_file():
            raise InputError(f"frame {frame!r} has no definition file {path}", needed_by, line)
        handler = _FrameFile()
        _parse_xml(path, handler)
        self._cache[frame] = handler.fes
        return handler.fes


def _label_span(attrs: dict[str, str], text: str, path: Path, line: int) -> tuple[int, int] | None:
    """(start, end_inclusive) of a label, None when it has no offsets; checks the range."""
    s, e = attrs.get("start"), attrs.get("end")
    if s is None and e is None:
        return None
    if s is None or e is None:
        raise InputError(f"label {attrs.get('name', '')!r} has only one of start/end", path, line)
    try:
        start, end = int(s), int(e)
    except ValueError:
        raise InputError(f"label offsets are not integers: start={s!r} end={e!r}", path, line) from None
    if not 0 <= start <= end < len(text):
        raise InputError(
            f"label {attrs.get('name', '')!r} offsets {start}..{end} are outside the sentence text "
            f"(length {len(text)})",
            path,
            line,
        )
    return start, end


class _DocumentReader:
    """Expat handlers for one fulltext file; builds Sentences as </sentence> closes.

    Only what the frames annotation needs is kept: the sentence text, and the Target and
    rank-1 FE layers of annotation sets that name a frame (with each label's line)."""

    parser: expat.XMLParserType

    def __init__(self, path: Path, doc: str, lexicon: _FrameLexicon, corpus: Corpus):
        self.path, self.doc, self.lexicon, self.corpus = path, doc, lexicon, corpus
        self.sentence: dict | None = None
        self.in_set = False
        self.aset: dict | None = None  # the current annotation set, if it names a frame
        self.labels: list | None = None  # label list of the current kept layer
        self.text_parts: list[str] = []

    # expat callbacks
    def start(self, name: str, attrs: dict[str, str]) -> None:
        if name == "label":
            if self.labels is not None:
                self.labels.append((attrs, self.parser.CurrentLineNumber))
        elif name == "layer":
            if self.aset is not None:
                layer = attrs.get("name")
                if layer == "Target":
                    self.labels = self.aset["target"]
                elif layer == "FE" and attrs.get("rank", "1") == "1":
                    self.labels = self.aset["fe"]
        elif name == "annotationSet":
            self.in_set = True
            if self.sentence is not None and "frameName" in attrs:
                self.aset = {"attrs": attrs, "line": self.parser.CurrentLineNumber, "target": [], "fe": []}
                self.sentence["sets"].append(self.aset)
        elif name == "sentence":
            self.sentence = {"id": attrs.get("ID", ""), "line": self.parser.CurrentLineNumber, "text": None, "sets": []}
        elif name == "text" and self.sentence is not None and not self.in_set:
            self.text_parts = []
            self.parser.CharacterDataHandler = self.text_parts.append

    def end(self, name: str) -> None:
        if name == "layer":
            self.labels = None
        elif name == "annotationSet":
            self.aset = None
            self.in_set = False
        elif name == "text" and self.parser.CharacterDataHandler is not None:
            self.parser.CharacterDataHandler = None
            self.sentence["text"] = "".join(self.text_parts)
        elif name == "sentence" and self.sentence is not None:
            sentence = self._build(self.sentence)
            if sentence.words:
                self.corpus.sentences.append(sentence)
            else:
                self.corpus.skip("empty_sentence", sent_id=sentence.sent_id)
            self.sentence = None

    # building
    def _build(self, sent: dict) -> Sentence:
        path, text = self.path, sent["text"]
        if text is None:
            raise InputError("<sentence> has no <text> element", path, sent["line"])
        spans = ptb_word_spans(text)
        starts = [s for s, _ in spans]
        ends = [e for _, e in spans]

        def words_of(start: int, end: int) -> list[int]:
            # words overlapping [start, end] (end inclusive): word.end > start and word.start <= end
            return list(range(bisect_right(ends, start), bisect_right(starts, end)))

        frames = []
        for aset in sent["sets"]:
            attrs = aset["attrs"]
            frame = attrs["frameName"]
            target: set[int] = set()
            has_target = False
            for lab, line in aset["target"]:
                span = _label_span(lab, text, path, line)
                if span is not None:
                    has_target = True
                    target.update(words_of(*span))
            fe_labels = aset["fe"]
            if not has_target:
                self.corpus.note("frame_without_target")
                continue
            core_types = self.lexicon.core_types(frame, path, aset["line"])
            fes: dict[str, dict] = {}
            for lab, line in fe_labels:
                span = _label_span(lab, text, path, line)
                if span is None:
                    itype = lab.get("itype", "")
                    if itype in _NULL_ITYPES:
                        self.corpus.note("null_instantiation")
                    elif itype == "INC":
                        self.corpus.note("incorporated_fe")
                    else:
                        raise InputError(
                            f"FE label {lab.get('name', '')!r} has no offsets and no null-instantiation "
                            f"itype (itype={itype!r})",
                            path,
                            line,
                        )
                    continue
                name = lab.get("name", "")
                fe = fes.get(name)
                if fe is None:
                    core_type = core_types.get(name, "")
                    fe = fes[name] = {
                        "name": name,
                        "core": core_type in CORE_TYPES,
                        "coreType": core_type,
                        "words": set(),
                    }
                fe["words"].update(words_of(*span))
            for fe in fes.values():
                fe["words"] = sorted(fe["words"])
            frames.append(
                {
                    "frame": frame,
                    "lu": attrs.get("luName", ""),
                    "target": sorted(target),
                    "fes": list(fes.values()),
                }
            )
        return Sentence(
            words=[text[s:e] for s, e in spans],
            ann={"frames": frames, "text": text, "offsets": spans},
            sent_id=f"{self.doc}#{sent['id']}",
            source=str(path),
            line=sent["line"],
        )


# --------------------------------------------------------------------------- public API


def read_document_list(path: str | Path) -> list[str]:
    """Document base names from a text file: one per line, ``#`` starts a comment, blank lines
    ignored, a trailing ``.xml`` is dropped (so open-sesame style lists work)."""
    names: list[str] = []
    for lineno, raw in enumerate(read_text_lines(path), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if len(line.split()) != 1:
            raise InputError(f"expected one document name per line, got {line!r}", path, lineno)
        names.append(line[:-4] if line.endswith(".xml") else line)
    return names


def read_framenet(
    root: str | Path,
    documents: list[str] | tuple[str, ...] | None = None,
    *,
    allow_missing: bool = False,
) -> Corpus:
    """Read FrameNet full-text annotation from ``root`` (the directory holding ``fulltext/``
    and ``frame/``); all documents in name order, or ``documents`` (base names such as
    ``"ANC__110CYL067"``, read in the order given, duplicates read once). A name with no
    ``fulltext/<name>.xml`` is an InputError, or with ``allow_missing=True`` is counted as
    ``skipped["missing_document"]``. See the module docstring for the annotation format."""
    root = Path(root)
    fulltext = root / "fulltext"
    if not root.is_dir():
        raise InputError("not a directory (expected a FrameNet directory with fulltext/ and frame/)" if root.exists()
                         else "FrameNet directory not found", root)
    if not fulltext.is_dir():
        raise InputError("not a FrameNet directory: it has no fulltext/ folder", root)
    try:
        available = {p.stem: p for p in fulltext.iterdir() if p.suffix == ".xml"}
    except OSError as e:
        raise InputError(f"cannot read directory ({e.strerror or type(e).__name__})", fulltext) from None
    missing = 0
    if documents is None:
        paths = [(name, available[name]) for name in sorted(available)]
        if not paths:
            raise InputError("no fulltext/*.xml documents", fulltext)
    else:
        if isinstance(documents, str):
            raise TypeError("documents must be a list of document names, not a string")
        paths = []
        seen: set[str] = set()
        for raw in documents:
            name = raw[:-4] if raw.endswith(".xml") else raw
            if name in seen:
                continue
            seen.add(name)
            if name in available:
                paths.append((name, available[name]))
            elif allow_missing:
                missing += 1
            else:
                raise InputError(
                    f"unknown FrameNet document {name!r}: not among the {len(available)} documents "
                    f"in {fulltext} (allow_missing=True skips and counts missing documents)",
                    fulltext / f"{name}.xml",
                )
    corpus = Corpus(sentences=[], files=[])
    if missing:
        corpus.note("missing_document", missing)
    lexicon = _FrameLexicon(root / "frame")
    for name, path in paths:
        _parse_xml(path, _DocumentReader(path, name, lexicon, corpus))
        corpus.files.append(str(path))
    return corpus
