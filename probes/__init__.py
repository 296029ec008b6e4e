"""probes: parameter-free probing of transformer attention heads.

    import probes
    results = probes.run(["dep"], model="bert-base-cased", corpus="en_ewt-ud-test.conllu")
    results["dep"].best("nsubj"); results["dep"].to_frame(); results["dep"].save("results/")
"""
from probes.provenance import probes_version

__version__ = probes_version()

from probes.errors import InputError
from probes.model import Encoder, load_encoder
from probes.probe import LabelSums, Option, Probe
from probes.registry import available, get_probe, load_code, register
from probes.results import BestHead, LabelScores, ProbeResult, RunInfo, load_result
from probes.runner import run
from probes.state_files import merge
from probes.compare import checkpoint_similarity, compare_results, correlate, load_any
from probes.ablation import AblationResult, ablate
from probes.studies import Study, study

__all__ = ["__version__", "InputError", "Encoder", "load_encoder", "Option", "Probe", "LabelSums", "register",
           "available", "get_probe", "load_code", "BestHead", "LabelScores", "ProbeResult", "RunInfo",
           "load_result", "run", "merge", "compare_results", "checkpoint_similarity", "correlate", "load_any",
           "ablate", "AblationResult", "study", "Study"]
