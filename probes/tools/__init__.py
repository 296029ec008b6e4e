"""What is built on runs: ablation, comparisons, studies, the report, `probes show`, the decoders' detect,
the commands' arguments."""
