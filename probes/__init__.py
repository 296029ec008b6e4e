"""probes: parameter-free probing of transformer attention heads.

    import probes
    results = probes.run(["dep"], model="bert-base-cased", corpus="en_ewt-ud-test.conllu")
    results["dep"].best("nsubj"); results["dep"].to_frame(); probes.save_result(results["dep"], "results/")

The public names are imported on first use (probes.exports), so that ``import probes`` and the command
line's parser (``probes --help``, ``probes list``, argument errors) load neither torch nor transformers.
"""
from probes.exports import lazy_exports
from probes.provenance import probes_version

__version__ = probes_version()

_PUBLIC = {"InputError": "probes.errors", "Encoder": "probes.model", "load_encoder": "probes.model",
           "Option": "probes.options", "Probe": "probes.probe", "LabelSums": "probes.probe",
           "register": "probes.registry", "available": "probes.registry", "get_probe": "probes.registry",
           "load_code": "probes.registry", "BestHead": "probes.results", "LabelScores": "probes.results",
           "ProbeResult": "probes.results", "RunInfo": "probes.results", "load_result": "probes.results",
           "save_result": "probes.figures", "run": "probes.runner", "run_models": "probes.studies.models",
           "RunSettings": "probes.settings", "merge": "probes.state_files", "compare_results": "probes.compare",
           "checkpoint_similarity": "probes.compare", "correlate": "probes.compare", "load_any": "probes.compare",
           "ablate": "probes.ablation", "AblationResult": "probes.ablation", "study": "probes.studies",
           "Study": "probes.studies"}
__all__ = ["__version__", *_PUBLIC]
lazy_exports(__name__, _PUBLIC)
