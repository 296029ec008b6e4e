"""Decoder-only (causal) language models: the family table, the capture of their maps from queries and keys, and
the generated token sequences the causal head detectors read (probes.builtin.causal)."""
