"""Analyses of what each head does, from the literature: no labels beyond the text itself.

Level. Every analysis but one works on the model's own tokens (subwords and special tokens),
as Clark et al. (2019, §3) analyse BERT's attention maps: mass on [CLS]/[SEP] is a token-level
notion, and so are offsets, entropy and patterns. Query rows are all real tokens of a sentence
(special tokens included); keys are all real tokens; padding never counts. ``rare`` works on
words (a frequency belongs to a word), with the run's subword→word pooling (--pool).

    mass           mean attention on [CLS], [SEP], punctuation, self, previous and next token
    entropy        entropy of each row, its gap to uniform attention, confidence (mean max weight)
    positional     share of rows whose argmax sits at a fixed offset (positional heads)
    rare           share of words whose argmax is the sentence's least frequent word
    patterns       attention-pattern class of each map: vertical, diagonal, vertical+diagonal, block, heterogeneous
    head_distance  Jensen–Shannon distance between every two heads, clustering and a 2-D layout
    word_order     how much a head's attention changes when the words are shuffled
    term_matching  attention between identical tokens of the two sentences of a pair
"""
