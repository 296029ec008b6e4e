"""Head ablation: disable attention heads (zero or uniform) and measure what a model loses or gains.

    from probes import RunSettings
    from probes.tools.ablation import ablate
    result = ablate("classify", model="genre-minilm/", corpus="en_ewt-ud-test.conllu",
                    settings=RunSettings(batch_size=64, limit=1000), label_from="sent_id-prefix",
                    sweeps=["heads", "layers"])
    result.baseline; result.head_grid("accuracy"); result.ranked("accuracy", "heads")[:5]; result.save("out/")

    from probes.tools.ablation import prune
    curves = prune("genre-minilm/", "en_ewt-ud-test.conllu", ["importance", "random", "probe:dep:nsubj"],
                   order_data="en_ewt-ud-dev.conllu", label_from="sent_id-prefix")
    curves.values["importance"]["accuracy"]; curves.save("out/")
"""
from probes.base.exports import lazy_exports

_PUBLIC = {"load_classifier": "probes.tools.ablation.classifier", "head_importance": "probes.tools.ablation.importance",
           "MODES": "probes.capture.masking", "HeadMasker": "probes.capture.masking",
           **dict.fromkeys(("SWEEPS", "Mask", "build_masks", "keep_mask", "mask_tensor", "parse_mask"),
                           "probes.capture.ablation_masks"),
           "PruningResult": "probes.tools.ablation.pruning", "prune": "probes.tools.ablation.pruning",
           "AblationResult": "probes.tools.ablation.result", "ablate": "probes.tools.ablation.sweep"}  # name -> its module
__all__ = ["ablate", "AblationResult", "HeadMasker", "MODES", "Mask", "SWEEPS", "build_masks", "mask_tensor",
           "parse_mask", "keep_mask", "load_classifier", "head_importance", "prune", "PruningResult"]
lazy_exports(__name__, _PUBLIC)
