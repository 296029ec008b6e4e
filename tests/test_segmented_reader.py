from pathlib import Path

import pytest

from probes.corpus.segmented import read_segmented, segmentation_from_conllu_words
from probes.base.errors import InputError

CORPORA = Path(__file__).resolve().parents[2] / "shared" / "corpora"
GSD = CORPORA / "ud-chinese-gsdsimp"


def write(tmp_path, text, name):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_read_segmented(tmp_path):
    p = write(tmp_path, "我们  喜欢 北京\u3000天安门 。\n他 来 了\n\n\n", "seg.txt")
    c = read_segmented(p)
    assert len(c.sentences) == 2 and c.files == [str(p)]
    a, b = c.sentences
    assert a.words == ["我们", "喜欢", "北京", "天安门", "。"]
    assert a.ann["text"] == "我们喜欢北京天安门。"
    assert a.ann["word_spans"] == [(0, 2), (2, 4), (4, 6), (6, 9), (9, 10)]
    assert b.ann["word_spans"] == [(0, 1), (1, 2), (2, 3)]
    assert (a.line, b.line, b.sent_id) == (1, 2, "seg:2")


def test_empty_line_inside_is_an_error(tmp_path):
    p = write(tmp_path, "我们 喜欢\n他 来\n  \n好\n\n", "gap.txt")
    with pytest.raises(InputError) as e:
        read_segmented(p)
    assert str(e.value) == f"{p}:3: empty line: one sentence per line expected"


def test_words_in_raw_text():
    # the raw line keeps its space ("iPhone 6"): spans index into it as written
    text, spans = segmentation_from_conllu_words(["我", "用", "iPhone", "6", "拍照"], "我用iPhone 6拍照")
    assert text == "我用iPhone 6拍照"
    assert spans == [(0, 1), (1, 2), (2, 8), (9, 10), (10, 12)]
    assert [text[a:b] for a, b in spans] == ["我", "用", "iPhone", "6", "拍照"]


def test_raw_text_mismatch_names_file_line_and_character():
    with pytest.raises(InputError) as e:
        segmentation_from_conllu_words(["他", "来", "了"], "他去了", path="seg.txt", line=2)
    assert str(e.value) == "seg.txt:2: word 2 '来' does not match the text at character 1 ('去')"
    with pytest.raises(InputError) as e:
        segmentation_from_conllu_words(["他", "来", "了"], "他来了 好", path="seg.txt", line=2)
    assert str(e.value) == "seg.txt:2: text goes on after the last word: '好'"
    with pytest.raises(InputError, match=r"word 'a b' is empty or contains whitespace"):
        segmentation_from_conllu_words(["a b"], "a b")


def test_segmentation_from_words():
    assert segmentation_from_conllu_words(["ab", "c"]) == ("abc", [(0, 2), (2, 3)])
    assert segmentation_from_conllu_words(["I", "ca", "n't"], "I can't") == (
        "I can't", [(0, 1), (2, 4), (4, 7)])
    with pytest.raises(InputError, match=r"f\.conllu:7: word 2 'x'"):
        segmentation_from_conllu_words(["a", "x"], "a b", path="f.conllu", line=7)


@pytest.mark.skipif(not GSD.is_dir(), reason=f"shared corpora not found at {GSD}")
def test_real_chinese_segmentation(tmp_path):
    # SIGHAN-format gold and raw files derived from UD Chinese GSDSimp (FORMs and # text)
    seg_lines, raw_lines, words = [], [], []
    for line in (GSD / "zh_gsdsimp-ud-dev.conllu").read_text(encoding="utf-8").splitlines():
        if line.startswith("# text = "):
            raw_lines.append(line[len("# text = "):])
        elif line and line[0].isdigit():
            cols = line.split("\t")
            if cols[0].isdigit():
                words.append(cols[1])
        elif not line and words:
            seg_lines.append(" ".join(words))
            words = []
    seg = write(tmp_path, "\n".join(seg_lines) + "\n", "dev.seg")
    c = read_segmented(seg)
    assert len(c.sentences) == len(raw_lines) == 500
    n_words = sum(len(s.words) for s in c.sentences)
    n_chars = sum(len(s.ann["text"]) for s in c.sentences)
    assert 10_000 < n_words < 15_000 and 1.3 < n_chars / n_words < 2.2
    for s, raw in zip(c.sentences, raw_lines):  # the gold words spell out each raw sentence
        text, spans = segmentation_from_conllu_words(s.words, raw)
        assert [text[a:b] for a, b in spans] == s.words
        assert "".join(raw.split()) == s.ann["text"]
    s = c.sentences[0]
    assert s.words[:6] == ["同样", "，", "施力", "的", "大小", "不同"]
    assert s.ann["text"] == "同样，施力的大小不同，引起的加速度不同，最终的结果也不一样，亦可以从向量的加成性来看。"
    assert s.ann["word_spans"][:3] == [(0, 2), (2, 3), (3, 5)]
