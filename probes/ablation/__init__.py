"""Head ablation: disable attention heads (zero or uniform) and measure what a model loses or gains.

    from probes.ablation import ablate
    result = ablate("classify", model="genre-minilm/", corpus="en_ewt-ud-test.conllu",
                    label_from="sent_id-prefix", sweeps=["heads", "layers"])
    result.baseline; result.head_grid("accuracy"); result.ranked("accuracy", "heads")[:5]; result.save("out/")

    from probes.ablation import prune
    curves = prune("genre-minilm/", "en_ewt-ud-test.conllu", ["importance", "random", "probe:dep:nsubj"],
                   order_data="en_ewt-ud-dev.conllu", label_from="sent_id-prefix")
    curves.values["importance"]["accuracy"]; curves.save("out/")
"""
from probes.ablation.classifier import load_classifier
from probes.ablation.importance import head_importance
from probes.ablation.masking import MODES, HeadMasker
from probes.ablation.masks import SWEEPS, Mask, build_masks, keep_mask, mask_tensor, parse_mask
from probes.ablation.pruning import PruningResult, prune
from probes.ablation.result import AblationResult
from probes.ablation.sweep import ablate

__all__ = ["ablate", "AblationResult", "HeadMasker", "MODES", "Mask", "SWEEPS", "build_masks", "mask_tensor",
           "parse_mask", "keep_mask", "load_classifier", "head_importance", "prune", "PruningResult"]
