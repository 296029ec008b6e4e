"""Studies: several models × probes × corpora, in shards, resumable, on local processes or Ray.

    import probes
    s = probes.study("study.toml", out="results/study")      # or a dict of the same shape
    s.frame            # the tidy table: model, probe, label, layer, head, score, count
    s.results["step-0"]["dep"].best("nsubj")

A study file declares models, probes with their options, corpora (the probes scored on each) and shards
(probes.studies.spec). Each (model, corpus, shard) unit is one ``probes.run`` whose forward passes feed every
probe of that corpus; its additive states are kept under its fingerprint in ``OUT/.units/``
(probes.studies.units), so a study run again does no model work, and one killed at any point finishes where
it stopped. Units run in this process, in local worker processes or on Ray (probes.studies.engines); their
states are merged into ``OUT/<model>/<probe>.json`` as ``probes run`` writes them, with the tidy table
``OUT/study.parquet`` / ``.csv`` and ``OUT/study.json`` (probes.studies.outputs).
"""
from probes.exports import lazy_exports

_PUBLIC = {"Study": "probes.studies.driver", "study": "probes.studies.driver", "StudyFailed": "probes.errors",
           "StudySpec": "probes.studies.spec", "read_study": "probes.studies.spec",
           "run_models": "probes.studies.models"}  # name -> its module
__all__ = ["study", "Study", "StudyFailed", "StudySpec", "read_study", "run_models"]
lazy_exports(__name__, _PUBLIC)
