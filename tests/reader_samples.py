"""A small valid input for every corpus reader (and for annotation layers), written into a folder.

SAMPLES[name] = (files, corpus): `files` maps paths relative to the folder to their bytes,
`corpus` is the path given to `read_corpus(..., format=name)` ("layers": both layer files).
"""
from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).parent / "data"

CONLLU = (
    "# sent_id = a\n# text = Dogs don't bark.\n"
    "1\tDogs\tdog\tNOUN\tNNS\t_\t3\tnsubj\t_\t_\n"
    "2-3\tdon't\t_\t_\t_\t_\t_\t_\t_\t_\n"
    "2\tdo\tdo\tAUX\tVBP\t_\t4\taux\t_\t_\n"
    "3\tn't\tnot\tPART\tRB\t_\t4\tadvmod\t_\tNER=O\n"
    "4\tbark\tbark\tVERB\tVB\t_\t0\troot\t_\tSpaceAfter=No\n"
    "4.1\tbark\tbark\tVERB\tVB\t_\t_\t_\t4:conj\t_\n"
    "5\t.\t.\tPUNCT\t.\t_\t4\tpunct\t_\t_\n\n"
    "# sent_id = b\n"
    "1\tHi\thi\tINTJ\tUH\t_\t0\troot\t_\t_\n\n"
)
COREF = ("#begin document (d); part 0\n" + "".join(
    f"d\t0\t{i}\t{w}" + "\t_" * 8 + f"\t{c}\n" for i, (w, c) in enumerate(
        [("Kim", "(0)"), ("saw", ""), ("the", "(1"), ("dog", "1)"), (".", "")])) + "\n" + "".join(
    f"d\t0\t{i}\t{w}" + "\t_" * 8 + f"\t{c}\n" for i, (w, c) in enumerate(
        [("She", "(0)"), ("fed", ""), ("it", "(1)"), (".", "")])) + "\n#end document\n")
IOB2 = ("# sent_id = a\n1\tDogs\tB-ORG\t-\t-\n2\tdo\tI-ORG\t-\t-\n3\tn't\tO\t-\t-\n4\tbark\tO\t-\t-\n5\t.\tO\t-\t-\n\n"
        "# sent_id = b\n1\tHi\tB-PER\t-\t-\n\n")
PTB = ("( (S (NP-SBJ-1 (DT The) (NN cat)) (VP (VBD sat) (-NONE- *T*-1)) (. .)) )\n"
       "(TOP (S (NP (NNS Dogs))\n    (VP (VBP bark) (-LRB- -LRB-))))\n")
NS = 'xmlns="http://framenet.icsi.berkeley.edu"'
FULLTEXT = f"""<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<fullTextAnnotation {NS}>
    <sentence ID="1">
        <text>Kim gave Sandy a book.</text>
        <annotationSet ID="10" status="MANUAL" frameName="Giving" luName="give.v">
            <layer rank="1" name="Target"><label end="7" start="4" name="Target"/></layer>
            <layer rank="1" name="FE">
                <label end="2" start="0" name="Donor"/>
                <label end="13" start="9" name="Recipient"/>
                <label itype="DNI" name="Time"/>
            </layer>
        </annotationSet>
    </sentence>
    <sentence ID="2"><text>Hello there.</text></sentence>
</fullTextAnnotation>
"""
FRAME = f"""<?xml version="1.0" encoding="UTF-8"?>
<frame name="Giving" {NS}><FE coreType="Core" name="Donor"/><FE coreType="Core" name="Recipient"/>
<FE coreType="Peripheral" name="Time"/></frame>
"""


def _utf8(text: str) -> bytes:
    return text.encode("utf-8")


SAMPLES: dict[str, tuple[dict[str, bytes], list[str]]] = {
    "conllu": ({"c.conllu": _utf8(CONLLU)}, ["c.conllu"]),
    "propbank": ({"up.conllu": (DATA / "sample_up.conllu").read_bytes()}, ["up.conllu"]),
    "conll2012": ({"c.gold_conll": (DATA / "sample.conll2012").read_bytes()}, ["c.gold_conll"]),
    "framenet": ({"fn/fulltext/doc.xml": _utf8(FULLTEXT), "fn/frame/Giving.xml": _utf8(FRAME)}, ["fn"]),
    "segmented": ({"seg.txt": _utf8("我们  喜欢 北京\u3000天安门 。\n他 来 了\n\n")}, ["seg.txt"]),
    "iob2": ({"c.iob2": _utf8(IOB2)}, ["c.iob2"]),
    "ptb": ({"c.tree": _utf8(PTB)}, ["c.tree"]),
    "craft": ({"ids.txt": _utf8("# test articles\n111\n222\n"), "penn/111.tree": _utf8(PTB),
               "penn/222.tree": _utf8("( (NP (NN Protein)) )\n")}, ["ids.txt"]),
    "spacy": ({"raw.txt": _utf8("The cat sat on the mat. It purred.\n\nDogs bark.\n")}, ["raw.txt"]),
    "pairs": ({"p.tsv": _utf8("sentence1\tsentence2\tlabel\nA cat sat .\tA dog sat .\tno\nHi\tHello\n")}, ["p.tsv"]),
    "coref": ({"c.conll": _utf8(COREF)}, ["c.conll"]),
    "token_ids": ({"s.ids": _utf8("# 2 sequences\n5 17 17 3\n\n0 9 12\n")}, ["s.ids"]),
    "layers": ({"c.conllu": _utf8(CONLLU), "c.iob2": _utf8(IOB2)}, ["c.conllu", "c.iob2"]),
}


def write_sample(folder: Path, name: str, replace: dict[str, bytes] | None = None) -> list[Path]:
    """Write sample `name` into `folder` (files in `replace` get those bytes instead); return its corpus paths."""
    files, corpus = SAMPLES[name]
    for rel, data in {**files, **(replace or {})}.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return [folder / c for c in corpus]


def reader_format(name: str) -> str | None:
    """The format to name for sample `name` (layers: none, read_corpus joins the two files)."""
    return None if name == "layers" else name
