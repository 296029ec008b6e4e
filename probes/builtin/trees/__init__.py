"""trees: dependency trees decoded from each head's word-level attention (the probe: probes.builtin.trees.probe;
the decoders: .decoders; the bounded selection sample: .sample; the greedy head ensemble: .ensemble)."""
