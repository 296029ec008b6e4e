"""Causal head detectors: parameter-free scores of the heads decoder-only models are known for, read from the
token ids and each layer's maps (no annotation): prev_token, duplicate_token, induction (with its OV circuit's
copying score) and sink. They run on any corpus; the repeated random token sequences of probes.encoding.sequences
are where induction is defined at every position of the second copy."""
