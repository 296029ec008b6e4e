"""FrameNet full-text reader: handmade XML with hand-computed offsets, plus the real corpus."""
from __future__ import annotations

from pathlib import Path

import pytest

from probes.corpus.framenet import (
    STANDARD_DEV_DOCUMENTS,
    STANDARD_TEST_DOCUMENTS,
    read_document_list,
    read_framenet,
)
from probes.base.errors import InputError

FRAMENET = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "framenet-1.7"

NS = 'xmlns="http://framenet.icsi.berkeley.edu" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"'

GIVING_FRAME = f"""<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<frame name="Giving" ID="139" {NS}>
    <definition>A Donor gives a Theme to a Recipient.</definition>
    <FE coreType="Core" abbrev="Donor" name="Donor" ID="1052"><definition>x</definition></FE>
    <FE coreType="Core" abbrev="Rec" name="Recipient" ID="1053"/>
    <FE coreType="Core" abbrev="Thm" name="Theme" ID="1054"/>
    <FE coreType="Peripheral" abbrev="Time" name="Time" ID="1055"/>
    <FE coreType="Core-Unexpressed" abbrev="Act" name="Act" ID="1056"/>
    <FEcoreSet><memberFE name="Donor" ID="1052"/></FEcoreSet>
</frame>
"""

# Offsets of the text below, by hand:
#   Kim 0-2 | did 4-6 | n't 7-9 | give 11-14 | Sandy 16-20 | 's 21-22 | dog 24-26 |
#   the 28-30 | book 32-35 | . 36          (words 0..9)
TEXT = "Kim didn't give Sandy's dog the book."


def fulltext(sets: str, text: str = TEXT) -> str:
    """A one-sentence fulltext document; the <sentence> is on line 6."""
    return f"""<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<fullTextAnnotation {NS}>
    <header>
        <corpus name="T" ID="1"><document name="doc" ID="2"/></corpus>
    </header>
    <sentence ID="77" sentNo="1">
        <text>{text}</text>
{sets}
    </sentence>
</fullTextAnnotation>
"""


GIVE_SET = """        <annotationSet ID="5" status="UNANN">
            <layer rank="1" name="PENN"><label start="0" end="2" name="NP"/></layer>
        </annotationSet>
        <annotationSet luName="give.v" frameName="Giving" status="MANUAL" ID="6">
            <layer rank="1" name="Target">
                <label start="11" end="14" name="Target"/>
            </layer>
            <layer rank="1" name="FE">
                <label start="0" end="2" name="Donor"/>
                <label start="16" end="26" name="Recipient"/>
                <label start="28" end="35" name="Theme"/>
                <label itype="INI" name="Time"/>
                <label start="17" end="21" name="Act"/>
            </layer>
            <layer rank="2" name="FE">
                <label start="28" end="30" name="Donor"/>
            </layer>
        </annotationSet>
        <annotationSet luName="give.v" frameName="Giving" status="MANUAL" ID="7">
            <layer rank="1" name="Target"/>
        </annotationSet>
        <annotationSet luName="give.v" frameName="Giving" status="MANUAL" ID="8">
            <layer rank="1" name="Target">
                <label start="4" end="6" name="Target"/>
            </layer>
            <layer rank="1" name="Target">
                <label start="11" end="14" name="Target"/>
            </layer>
            <layer rank="1" name="FE">
                <label start="28" end="30" name="Theme"/>
                <label start="0" end="2" name="Theme"/>
                <label itype="DNI" name="Recipient"/>
                <label itype="INC" name="Donor"/>
            </layer>
        </annotationSet>"""


def make_framenet(tmp_path: Path, docs: dict[str, str], frames: dict[str, str] | None = None) -> Path:
    root = tmp_path / "fn"
    (root / "fulltext").mkdir(parents=True)
    (root / "frame").mkdir()
    for name, xml in docs.items():
        (root / "fulltext" / f"{name}.xml").write_text(xml, encoding="utf-8")
    for name, xml in (frames if frames is not None else {"Giving": GIVING_FRAME}).items():
        (root / "frame" / f"{name}.xml").write_text(xml, encoding="utf-8")
    return root


def line_of(xml: str, needle: str) -> int:
    """1-based line of the first line containing needle (to check reported line numbers)."""
    return next(i for i, line in enumerate(xml.split("\n"), 1) if needle in line)


# --------------------------------------------------------------------------- handmade XML


def test_handmade_sentence_targets_fes_and_counts(tmp_path):
    xml = fulltext(GIVE_SET)
    root = make_framenet(tmp_path, {"doc": xml})
    corpus = read_framenet(root)

    assert len(corpus.sentences) == 1
    s = corpus.sentences[0]
    assert s.words == ["Kim", "did", "n't", "give", "Sandy", "'s", "dog", "the", "book", "."]
    assert s.sent_id == "doc#77"
    assert s.source == str(root / "fulltext" / "doc.xml")
    assert s.line == 6
    assert s.ann["text"] == TEXT
    assert s.ann["offsets"][3] == (11, 15)
    assert corpus.files == [str(root / "fulltext" / "doc.xml")]

    give, two_targets = s.ann["frames"]  # set 5 has no frame, set 7 has no target label
    assert give == {
        "frame": "Giving",
        "lu": "give.v",
        "target": [3],
        "fes": [
            {"name": "Donor", "core": True, "coreType": "Core", "words": [0]},
            {"name": "Recipient", "core": True, "coreType": "Core", "words": [4, 5, 6]},
            {"name": "Theme", "core": True, "coreType": "Core", "words": [7, 8]},
            # 17..21 = "andy'": every word overlapping the span, partially or not
            {"name": "Act", "core": True, "coreType": "Core-Unexpressed", "words": [4, 5]},
        ],
    }
    # Target labels of all Target layers united; the two "Theme" labels united into one FE.
    assert two_targets["target"] == [1, 3]
    assert two_targets["fes"] == [{"name": "Theme", "core": True, "coreType": "Core", "words": [0, 7]}]

    assert corpus.notes == {"null_instantiation": 2, "frame_without_target": 1, "incorporated_fe": 1} and not corpus.skipped


def test_document_selection_and_lists(tmp_path):
    root = make_framenet(tmp_path, {"a": fulltext(GIVE_SET), "b": fulltext("", text="Hello there .")})
    assert [s.sent_id for s in read_framenet(root).sentences] == ["a#77", "b#77"]  # name order
    assert [s.words for s in read_framenet(root, ["b"]).sentences] == [["Hello", "there", "."]]
    assert [s.sent_id for s in read_framenet(root, ["b", "a.xml", "b"]).sentences] == ["b#77", "a#77"]

    with pytest.raises(InputError) as e:
        read_framenet(root, ["a", "c"])
    assert "unknown FrameNet document 'c'" in str(e.value) and "c.xml" in str(e.value)
    corpus = read_framenet(root, ["a", "c"], allow_missing=True)
    assert len(corpus.sentences) == 1 and corpus.notes["missing_document"] == 1

    listing = tmp_path / "test-docs.txt"
    listing.write_text("# the test set\nb.xml\n\n  a   # inline comment\n", encoding="utf-8")
    assert read_document_list(listing) == ["b", "a"]
    listing.write_text("a\nb c\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"test-docs\.txt:2: expected one document name"):
        read_document_list(listing)


def test_standard_document_lists():
    assert len(STANDARD_TEST_DOCUMENTS) == 23 and len(set(STANDARD_TEST_DOCUMENTS)) == 23
    assert len(STANDARD_DEV_DOCUMENTS) == 8
    assert not set(STANDARD_TEST_DOCUMENTS) & set(STANDARD_DEV_DOCUMENTS)
    assert "ANC__110CYL067" in STANDARD_TEST_DOCUMENTS and "KBEval__MIT" in STANDARD_DEV_DOCUMENTS


def test_missing_frame_file_names_path_and_fulltext_line(tmp_path):
    sets = GIVE_SET.replace('frameName="Giving" status="MANUAL" ID="8"', 'frameName="No_such_frame" ID="8"')
    xml = fulltext(sets)
    root = make_framenet(tmp_path, {"doc": xml})
    with pytest.raises(InputError) as e:
        read_framenet(root)
    msg = str(e.value)
    assert msg.startswith(f"{root / 'fulltext' / 'doc.xml'}:{line_of(xml, 'No_such_frame')}: ")
    assert str(root / "frame" / "No_such_frame.xml") in msg
    assert "\n" not in msg


def test_malformed_xml_names_file_and_line(tmp_path):
    xml = fulltext(GIVE_SET).replace('<label start="16" end="26" name="Recipient"/>', '<label start="16" end="26">')
    root = make_framenet(tmp_path, {"doc": xml})
    with pytest.raises(InputError) as e:
        read_framenet(root)
    # the unclosed <label> is detected when </layer> closes the FE layer
    bad_line = line_of(xml, 'start="28" end="35"') + 3
    assert xml.split("\n")[bad_line - 1].strip() == "</layer>"
    assert str(e.value).startswith(f"{root / 'fulltext' / 'doc.xml'}:{bad_line}: malformed XML: mismatched tag")

    frame = GIVING_FRAME.replace("</frame>", "")
    root2 = make_framenet(tmp_path / "2", {"doc": fulltext(GIVE_SET)}, {"Giving": frame})
    with pytest.raises(InputError, match=r"Giving\.xml:\d+: malformed XML"):
        read_framenet(root2)


def test_offsets_outside_text_name_the_label_line(tmp_path):
    xml = fulltext(GIVE_SET.replace('<label start="28" end="35" name="Theme"/>', '<label start="28" end="37" name="Theme"/>'))
    root = make_framenet(tmp_path, {"doc": xml})
    label_line = line_of(xml, 'end="37"')
    with pytest.raises(InputError) as e:
        read_framenet(root)
    assert str(e.value).startswith(f"{root / 'fulltext' / 'doc.xml'}:{label_line}: ")
    assert "outside the sentence text (length 37)" in str(e.value)


def test_bad_root(tmp_path):
    with pytest.raises(InputError, match="not found"):
        read_framenet(tmp_path / "nope")
    with pytest.raises(InputError, match="no fulltext/ folder"):
        read_framenet(tmp_path)


# --------------------------------------------------------------------------- real corpus


@pytest.fixture(scope="module")
def real_corpus():
    if not (FRAMENET / "fulltext").is_dir():
        pytest.skip(f"FrameNet 1.7 not found at {FRAMENET} (the shared corpora sit beside the checkout)")
    return read_framenet(FRAMENET)


def test_real_corpus_counts(real_corpus):
    corpus = real_corpus
    assert len(corpus.files) == 106
    assert 9000 <= len(corpus.sentences) <= 10500  # 9,636 in this copy
    n_frames = sum(len(s.ann["frames"]) for s in corpus.sentences)
    assert 24000 <= n_frames <= 27000  # 25,798
    assert 6500 <= corpus.notes["null_instantiation"] <= 8000  # 7,345
    for s in corpus.sentences:
        assert len(s.words) == len(s.ann["offsets"])
        for f in s.ann["frames"]:
            assert f["target"] and all(0 <= i < len(s.words) for i in f["target"])
            assert all(fe["words"] and fe["words"][-1] < len(s.words) for fe in f["fes"])


def test_real_sentences_checked_by_hand(real_corpus):
    corpus = real_corpus
    by_id = {s.sent_id: s for s in corpus.sentences}

    # fulltext/ANC__110CYL067.xml line 40
    s = by_id["ANC__110CYL067#4106339"]
    assert s.line == 40
    assert s.words == "Your contribution to Goodwill will mean more than you may know .".split()
    frames = {f["lu"]: f for f in s.ann["frames"]}
    giving = frames["contribution.n"]  # Target 5..16, Donor 0..3, Recipient 18..28
    assert giving["frame"] == "Giving" and giving["target"] == [1]
    assert [(fe["name"], fe["words"], fe["core"]) for fe in giving["fes"]] == [
        ("Donor", [0], True),
        ("Recipient", [2, 3], True),
    ]
    # Hypothetical_event is labelled twice (50..52 "you", 58..61 "know"): one FE, both words
    assert frames["may.v"]["target"] == [9]
    assert frames["may.v"]["fes"][0]["words"] == [8, 10]

    # line 1846: "`` I 'd never finished high school ." Target never 8..12; Event 14..33 + 3..6
    s = by_id["ANC__110CYL067#4106356"]
    assert s.words == ["``", "I", "'d", "never", "finished", "high", "school", "."]
    never = next(f for f in s.ann["frames"] if f["lu"] == "never.adv")
    assert never["target"] == [3]
    assert never["fes"] == [{"name": "Event", "core": True, "coreType": "Core", "words": [1, 2, 4, 5, 6]}]


def test_real_standard_test_set():
    if not (FRAMENET / "fulltext").is_dir():
        pytest.skip(f"FrameNet 1.7 not found at {FRAMENET}")
    with pytest.raises(InputError, match="ANC__WhereToHongKong"):  # absent from this copy
        read_framenet(FRAMENET, STANDARD_TEST_DOCUMENTS)
    corpus = read_framenet(FRAMENET, STANDARD_TEST_DOCUMENTS, allow_missing=True)
    assert corpus.notes["missing_document"] == 1
    assert len(corpus.files) == 22
    assert 1500 <= len(corpus.sentences) <= 2500  # 1,909
