from pathlib import Path

import pytest

from probes.corpus.segmented import (read_segmented, read_segmented_with_raw,
                                     segmentation_from_conllu_words)
from probes.errors import InputError

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


def test_with_raw(tmp_path):
    seg = write(tmp_path, "我 用 iPhone 6 拍照\n他 来 了\n", "seg.txt")
    raw = write(tmp_path, "我用iPhone 6拍照\n他来了\n", "raw.txt")
    c = read_segmented_with_raw(seg, raw)
    s = c.sentences[0]
    assert s.ann["text"] == "我用iPhone 6拍照"
    assert s.ann["word_spans"] == [(0, 1), (1, 2), (2, 8), (9, 10), (10, 12)]
    assert [s.ann["text"][a:b] for a, b in s.ann["word_spans"]] == s.words
    assert c.files == [str(seg), str(raw)]


def test_with_raw_mismatch_names_both_files_and_line(tmp_path):
    seg = write(tmp_path, "我 用 手机\n他 来 了\n", "seg.txt")
    raw = write(tmp_path, "我用手机\n他去了\n", "raw.txt")
    with pytest.raises(InputError) as e:
        read_segmented_with_raw(seg, raw)
    msg = str(e.value)
    assert msg.startswith(f"{seg}:2: characters differ from {raw}:2 at character 2")
    assert "'来' here, '去' there" in msg


def test_with_raw_different_lengths(tmp_path):
    seg = write(tmp_path, "我 用 手机\n他 来 了\n", "seg.txt")
    raw = write(tmp_path, "我用手机\n他来了\n好\n", "raw.txt")
    with pytest.raises(InputError, match=r"raw\.txt:3: 3 sentences here but only 2 in .*seg\.txt"):
        read_segmented_with_raw(seg, raw)
    raw2 = write(tmp_path, "我用手机\n他来了好\n", "raw2.txt")
    with pytest.raises(InputError, match=r"seg\.txt:2: .*at character 4 .*: end of line here, '好' there"):
        read_segmented_with_raw(seg, raw2)


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
    raw = write(tmp_path, "\n".join(raw_lines) + "\n", "dev.raw")
    c = read_segmented(seg)
    with_raw = read_segmented_with_raw(seg, raw)
    assert len(c.sentences) == len(with_raw.sentences) == 500
    n_words = sum(len(s.words) for s in c.sentences)
    n_chars = sum(len(s.ann["text"]) for s in c.sentences)
    assert 10_000 < n_words < 15_000 and 1.3 < n_chars / n_words < 2.2
    for s in with_raw.sentences:
        assert [s.ann["text"][a:b] for a, b in s.ann["word_spans"]] == s.words
    s = c.sentences[0]
    assert s.words[:6] == ["同样", "，", "施力", "的", "大小", "不同"]
    assert s.ann["text"] == "同样，施力的大小不同，引起的加速度不同，最终的结果也不一样，亦可以从向量的加成性来看。"
    assert s.ann["word_spans"][:3] == [(0, 2), (2, 3), (3, 5)]
