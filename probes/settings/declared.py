"""The built-in probes as the command line knows them before their code is imported: the name, the line `probes
list` prints, and the options (flags of `probes run` and `probes ablate`, ``name=`` in ``probes.run``). Each
probe's class takes its declaration (``class DependencyProbe(Probe, declared=DEP)``), so what is declared here is
what the probe has; the registry imports a probe's module (and with it torch) only when the probe is used."""
from __future__ import annotations

from probes.base.choices import COPYING_NORMS, COPYING_VOCABULARIES
from probes.base.options import Declaration, Option

END_RULES = ("next", "sep")  # seg: when a unit ends a word
LINKAGES = ("average", "complete", "single", "weighted")  # head_distance: the hierarchical clustering methods
SEED = Option("seed", 0, "seed of the word shuffle (word_order) and of head_distance's token draw", int)

DEP = Declaration("dep", "probes.builtin.dep", "dependency arcs: is a relation's head (or dependent) the word a head "
                  "attends to most (Clark et al. 2019)", (
    Option("subtypes", False, "keep relation subtypes (nmod:poss) instead of the universal part (nmod)", bool),
    Option("zero_self", False, "zero each word's own column before the argmax (Clark et al.'s code)", bool),
    Option("words_only", False, "drop the [CLS]/[SEP] rows and columns before the argmax: words point only at "
           "words, root arcs are never right (Clark et al.'s code)", bool),
    Option("head_to_dep", "row", "read head_to_dep as the head's row (pred[h] == d) or the dependent's column "
           "(the word attending most to d is h; Clark et al.'s code)", str, ("row", "column")),
    Option("offsets", "free", "offset baselines: free (-3..+3 but 0) or clamped (-3..+2 clamped to the sentence; "
           "Clark et al.'s code)", str, ("free", "clamped"))),
    score="accuracy (arcs found)")

SEG = Declaration("seg", "probes.builtin.seg.probe", "word segmentation: heads that look at the next token inside a "
                  "word and away (at [SEP]) at its end", (
    Option("end_rule", "next", "a unit ends a word when the head's argmax is not the next token (next), or only "
           "when it is the end special token [SEP] (sep)", str, END_RULES),
    Option("ensemble_size", 10, "largest greedy best-k head ensemble; 0 for none (otherwise every head's "
           "prediction is kept in memory, 1 bit per token per head)", int),
    Option("seg_examples", 10, "keep every head's segmentation of the first N sentences for `probes show` and "
           "`probes report` (their per-sentence views are --examples)", int)),
    presentation="probes.builtin.seg.show:SegPresentation",
    score="overall: word F1; labels: their own measure")

SRL = Declaration("srl", "probes.builtin.srl", "predicate-argument: does the predicate attend into an argument, or "
                  "an argument word to the predicate", (
    Option("arg_span", "subtree", "argument words: subtree = the labelled token's dependency subtree (UP) or the "
           "gold span (CoNLL-2012); head = the labelled token only (UP)", str, ("subtree", "head")),),
    score="accuracy (arguments found)")

FRAMES = Declaration("frames", "probes.builtin.frames", "FrameNet: largest attention between a frame's target and "
                     "its core elements (Kovaleva et al. 2019)", (
    Option("max_sentence_words", 12, "use sentences of at most this many words (0: any length)", int),
    Option("max_fe_words", 3, "use frame elements of at most this many words (0: any length)", int),
    Option("adjacent_fes", False, "keep frame elements right next to the target", bool),
    Option("all_fes", False, "keep non-core frame elements too", bool),
    Option("documents", None, "FrameNet documents to read: a file of names (one per line), or standard-test / "
           "standard-dev", str)),
    score="mean largest attention weight")

POS = Declaration("pos", "probes.builtin.pos", "part-of-speech tags: nearest per-head centroid of word context "
                  "vectors (He & Choi 2021)", (
    Option("tagset", "upos", "pos tags to probe: upos (CoNLL-U column 4) or xpos (column 5, PTB tags)", str,
           ("upos", "xpos")),),
    presentation="probes.builtin.fitted:FitPresentation",
    score="accuracy (nearest centroid)")

NER = Declaration("ner", "probes.builtin.ner", "named-entity types: nearest per-head centroid of entity-span context "
                  "vectors (He & Choi 2021)", (
    Option("repair_i_after_o", False, "IOB2: read an I- tag that follows O (or another type) as B- instead of "
           "stopping with an error", bool),),
    presentation="probes.builtin.fitted:FitPresentation",
    score="accuracy (nearest centroid)")

CON = Declaration("con", "probes.builtin.con", "constituent labels: nearest per-head centroid of phrase context "
                  "vectors (He & Choi 2021)", (
    Option("phrases", "lowest", "lowest = phrases whose children are all preterminals (height-3 subtrees, He & "
           "Choi 2021); all = every phrase", str, ("lowest", "all")),),
    presentation="probes.builtin.fitted:FitPresentation",
    score="accuracy (nearest centroid)")

TREES = Declaration("trees", "probes.builtin.trees.probe", "dependency trees decoded from each head's attention "
                    "(Chu–Liu–Edmonds, Eisner): UAS per head", (
    Option("ensemble_heads", 4, "trees: most heads in the greedy head ensemble, chosen on the selection split "
           "(--select-on); 0: no ensemble and no selection pass", int),
    Option("select_sentences", 500, "trees: most sentences of the selection split kept to choose the ensemble "
           "on (a hash-chosen sample)", int),
    Option("tree_decoding", "host", "trees: where the trees are decoded: host = compiled decoders on the CPU's "
           "threads, beside the model's pass; device = batched tensor code on the model's device, a batch's trees at "
           "its last layer (the same trees)", str, ("host", "device"))),
    presentation="probes.builtin.trees.details:TreesPresentation",
    score="UAS (decoded trees)")

MASS = Declaration("mass", "probes.builtin.analyses.mass", "mean attention on [CLS], [SEP], punctuation, self, "
                   "previous and next token (Clark et al. 2019)",
    score="mean attention weight")

ENTROPY = Declaration("entropy", "probes.builtin.analyses.entropy", "attention entropy, its gap to uniform, and "
                      "confidence (mean max weight; Voita et al. 2019)",
    score="nats (overall, gap); weight (confidence)")

POSITIONAL = Declaration("positional", "probes.builtin.analyses.positional", "share of tokens whose argmax is at a "
                         "fixed offset; positional heads at >= 0.9 (Voita et al. 2019)", (
    Option("positional_threshold", 0.9, "a head is positional when its best offset share reaches this", float),),
    score="share of tokens")

RARE = Declaration("rare", "probes.builtin.analyses.rare", "share of words whose argmax is the sentence's least "
                   "frequent word (Voita et al. 2019)", (
    Option("frequencies", "", "word frequency file, 'word<TAB>count' a line (default: count the corpus)"),
    Option("case_sensitive", False, "rare: count word frequencies without lowercasing", bool)),
    score="share of words")

PATTERNS = Declaration("patterns", "probes.builtin.analyses.patterns", "attention-pattern class of each map: "
                       "vertical, diagonal, vertical+diagonal, block, heterogeneous (Kovaleva et al. 2019; "
                       "rule-based)", (
    Option("pattern_major", 0.6, "mass a pattern must hold alone (vertical, diagonal, block)", float),
    Option("pattern_minor", 0.2, "mass each part of vertical+diagonal must hold (together: major)", float)),
    score="share of maps")

HEAD_DISTANCE = Declaration("head_distance", "probes.builtin.analyses.head_distance", "Jensen-Shannon distance "
                            "between every two heads, clustering and 2-D layout (Clark et al. 2019)", (
    Option("distance_rows", 4, "head_distance: query tokens compared per sentence, a seeded draw (0: every token)",
           int),
    SEED,
    Option("clusters", 8, "head_distance: number of flat clusters cut from the hierarchy", int),
    Option("linkage", "average", "head_distance: hierarchical clustering method", str, LINKAGES)),
    presentation="probes.builtin.analyses.head_layout:HeadDistancePresentation",
    score="Jensen-Shannon distance")

WORD_ORDER = Declaration("word_order", "probes.builtin.analyses.word_order", "how much each head's attention moves "
                         "when the words are shuffled (second forward pass)", (SEED,),
    score="share of attention moved")

TERM_MATCHING = Declaration("term_matching", "probes.builtin.analyses.term_matching", "attention from a token to the "
                            "identical token in the other sentence of a pair (TSV pairs)",
    score="share of attention")

PREV_TOKEN = Declaration("prev_token", "probes.builtin.causal.prev_token", "causal models: mean attention from each "
                         "token to the one before it (previous-token heads)",
    score="mean attention weight")

DUPLICATE_TOKEN = Declaration("duplicate_token", "probes.builtin.causal.duplicate_token", "causal models: attention "
                              "from a token to its earlier occurrences (duplicate-token heads)",
    score="mean attention weight")

INDUCTION = Declaration("induction", "probes.builtin.causal.induction", "causal models: attention from a repeated "
                        "token to the token after its earlier occurrence, and the OV circuit's copying score (induction "
                        "heads, Olsson et al. 2022)", (
    Option("induction_threshold", 0.3, "induction: a head is an induction head when its prefix-matching score reaches "
           "this and its copying score is positive", float),
    Option("copying_vocab", "no-special", "induction: the OV copying score's vocabulary: without the tokenizer's "
           "special tokens (no-special) or all of it", str, COPYING_VOCABULARIES),
    Option("copying_norms", "ignore", "induction: the OV copying score leaves the layer norms out (ignore) or folds "
           "each layer's input norm into W_V and the final norm into W_U, as TransformerLens' fold_ln (fold)", str,
           COPYING_NORMS)),
    score="prefix matching; copying (-1..1)")

SINK = Declaration("sink", "probes.builtin.causal.sink", "causal models: share of each head's attention on the first "
                   "token and on the start token (attention sinks, Xiao et al. 2023)",
    score="share of attention")

COREF = Declaration("coref", "probes.builtin.coref", "coreference: does an anaphor's head word attend most to an "
                    "antecedent's head word (Clark et al. 2019), documents cut into windows", (
    Option("window", 0, "coref: most subwords of a window of whole sentences, special tokens included (0: the "
           "model's limit)", int),
    Option("stride", 0, "coref: subwords from one window's start to the next's (0: half the window)", int),
    Option("mention_head", "spacy", "coref: a mention's head word: its syntactic head in spaCy's parse of the "
           "sentence, or its first or last word", str, ("spacy", "first", "last"))),
    score="accuracy (antecedents found)")

BUILTIN = {d.name: d for d in (DEP, SEG, SRL, FRAMES, POS, NER, CON, TREES, MASS, ENTROPY, POSITIONAL, RARE,
                               PATTERNS, HEAD_DISTANCE, WORD_ORDER, TERM_MATCHING, PREV_TOKEN, DUPLICATE_TOKEN,
                               INDUCTION, SINK, COREF)}
