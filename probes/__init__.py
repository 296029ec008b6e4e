"""probes: parameter-free probing of transformer attention heads.

    import probes
    results = probes.run(["dep"], model="bert-base-cased", corpus="en_ewt-ud-test.conllu")
    results["dep"].best("nsubj"); results["dep"].to_frame(); probes.save_result(results["dep"], "results/")

The public names are imported on first use (probes.base.exports), so that ``import probes`` and the command
line's parser (``probes --help``, ``probes list``, argument errors) load neither torch nor transformers.
"""
from probes.base.exports import lazy_exports
from probes.base.provenance import probes_version

__version__ = probes_version()

_PUBLIC = {  # name -> the module that defines it
    **dict.fromkeys(("InputError",), "probes.base.errors"), **dict.fromkeys(("Option",), "probes.base.options"),
    **dict.fromkeys(("Encoder", "load_encoder"), "probes.capture.model"),
    **dict.fromkeys(("Probe", "LabelSums"), "probes.scoring.probe"),
    **dict.fromkeys(("register", "available", "get_probe", "load_code"), "probes.settings.registry"),
    **dict.fromkeys(("RunSettings",), "probes.settings.run_settings"),
    **dict.fromkeys(("BestHead", "LabelScores", "ProbeResult", "RunInfo", "load_result"),
                    "probes.results.probe_result"),
    **dict.fromkeys(("save_result",), "probes.results.figures"),
    **dict.fromkeys(("run",), "probes.running.runner"), **dict.fromkeys(("merge",), "probes.running.state_files"),
    **dict.fromkeys(("compare_results", "checkpoint_similarity", "correlate", "load_any"), "probes.tools.compare"),
    **dict.fromkeys(("ablate", "AblationResult"), "probes.tools.ablation"),
    **dict.fromkeys(("study", "Study"), "probes.tools.studies"),
    **dict.fromkeys(("run_models",), "probes.tools.studies.models")}
__all__ = ["__version__", *_PUBLIC]
lazy_exports(__name__, _PUBLIC)
