"""Sentences to model inputs: subword encoding and word alignment, windows, batching, pooling, shuffles, the
decoders' generated sequences. Imports only probes.base and probes.corpus.

The names of probes.encoding.subwords are re-exported here (encoding was one module before the floors became folders)."""
from probes.base.exports import lazy_exports

_PUBLIC = dict.fromkeys(('END_COLUMN', 'UNKNOWN_SHARE_WARNED', 'UNKNOWN_SHARE_REFUSED', 'UNKNOWN_REFUSED_WORDS', 'UNKNOWN_UNITS_DOMINATE', 'UnknownWordsWarning', 'UnknownTokensWarning', 'Encoded', 'encode', 'unusable', 'unusable_rows', 'subword_columns', 'special_names', 'word_spans', 'UnknownWords', 'unknown_words'), "probes.encoding.subwords")
__all__ = list(_PUBLIC)
lazy_exports(__name__, _PUBLIC)
