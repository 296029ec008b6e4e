"""Studies: several models × probes × corpora, in shards, resumable, on local processes or Ray.

    import probes
    s = probes.study("study.toml", out="results/study")      # or a dict of the same shape
    s.frame            # the tidy table: model, probe, label, layer, head, score, count
    s.results["step-0"]["dep"].best("nsubj")

A study file declares models, probes with their options, corpora (the probes scored on each) and shards
(probes.tools.studies.spec). Each (model, corpus, shard) unit is one ``probes.run`` whose forward passes feed every
probe of that corpus; its additive states are kept under its fingerprint in ``OUT/.units/``
(probes.tools.studies.units), so a study run again does no model work, and one killed at any point finishes where
it stopped. Units run in this process, in local worker processes or on Ray (probes.tools.studies.engines); their
states are merged into ``OUT/<model>/<probe>.json`` as ``probes run`` writes them, with the tidy table
``OUT/study.parquet`` / ``.csv`` and ``OUT/study.json`` (probes.tools.studies.outputs).
"""
from probes.base.exports import lazy_exports

_PUBLIC = {"Study": "probes.tools.studies.driver", "study": "probes.tools.studies.driver", "StudyFailed": "probes.base.errors",
           "StudySpec": "probes.tools.studies.spec", "read_study": "probes.tools.studies.spec",
           "run_models": "probes.tools.studies.models"}  # name -> its module
__all__ = ["study", "Study", "StudyFailed", "StudySpec", "read_study", "run_models"]
lazy_exports(__name__, _PUBLIC)
