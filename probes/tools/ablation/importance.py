"""Gradient head importance (Michel et al. 2019, "Are Sixteen Heads Really Better than One?", eq. 2).

Shapes: B batch rows, T subword positions, L layers, H heads, d head size, N examples scored.

Each head's output (its slice of the context before the output projection W_O) is multiplied by a
gate ξ_h, all gates 1, so the model computes what it always does; the importance of head h is

    I_h = E_x |∂L(x)/∂ξ_h|

the mean over the N examples of the absolute derivative of that example's cross-entropy loss
(the gold label's) with respect to the gate. The gates are one per batch row ([B,L,H]), so one
backward pass of the summed loss gives each example's own derivative, the absolute value is
taken per example, as the equation says (the authors' code takes it of the batch-mean loss's
gradient, a batch-level approximation). The model is in eval mode (no dropout).

normalize=True (the default, as in the paper, section 4.2) divides each layer's scores by their
ℓ2 norm over the layer's heads: I_lh / ‖I_l·‖₂, so the scores of different layers compare.
Setting ξ_h = 0 is the "zero" mask of probes.capture.masking: importance is the first-order
estimate of what zeroing a head costs.
"""
from __future__ import annotations

from functools import partial

import numpy as np
import torch

from probes.tools.ablation.classifier import ClassifierTarget
from probes.capture.hookset import HookSet, Hooked


class HeadGates(Hooked):
    """Context manager: while active, each batch row's head outputs are multiplied by ``gates`` [B,L,H]
    (a leaf tensor that requires grad, made by ``reset(rows)``)."""

    def __init__(self, modules: list[torch.nn.Module], heads: int, head_dim: int):
        self.modules, self.heads, self.head_dim = list(modules), heads, head_dim
        self.gates: torch.Tensor | None = None  # [B,L,H]

    def add_hooks(self, hooks: HookSet) -> None:
        for layer, m in enumerate(self.modules):
            hooks.forward(m, partial(self._gate, layer), prepend=True)

    def clear(self) -> None:
        self.gates = None

    def reset(self, rows: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """New gates, all 1, for a batch of `rows`: [rows,L,H], requires grad."""
        self.gates = torch.ones(rows, len(self.modules), self.heads, dtype=dtype, device=device, requires_grad=True)
        return self.gates

    def _gate(self, layer: int, module, inputs, output):
        context = output[0]  # [B,T,H*d]
        b, t = context.shape[:2]
        heads = context.reshape(b, t, self.heads, self.head_dim) * self.gates[:, layer, None, :, None]  # [B,T,H,d]
        return (heads.reshape(context.shape), *output[1:])


def gate_gradients(target: ClassifierTarget, batch_size: int = 32) -> torch.Tensor:
    """∂L(x)/∂ξ [N,L,H] (float64) for each scored example x, in the order of ``target.chunks``."""
    model = target.model
    dtype = next(model.parameters()).dtype
    device = target.classifier.device
    rows = []
    with HeadGates(target.modules, target.heads, target.head_dim) as gates, torch.enable_grad():
        for chunk in target.chunks(batch_size):
            inputs = {k: v.to(device) for k, v in chunk.inputs.items()}
            xi = gates.reset(chunk.gold.shape[0], dtype, device)  # [B,L,H]
            logits = model(**inputs).logits  # [B,K]
            loss = torch.nn.functional.cross_entropy(logits, chunk.gold.to(device), reduction="sum")
            (grad,) = torch.autograd.grad(loss, xi)
            rows.append(grad.detach().double().cpu())
    return torch.cat(rows)


def head_importance(target: ClassifierTarget, *, normalize: bool = True, batch_size: int = 32) -> np.ndarray:
    """I [L,H]: the mean over the scored examples of |∂L(x)/∂ξ_h|; each layer divided by its ℓ2 norm if `normalize`."""
    importance = gate_gradients(target, batch_size).abs().mean(dim=0)  # [L,H]
    if normalize:
        norm = importance.norm(dim=1, keepdim=True)  # [L,1]
        importance = torch.where(norm > 0, importance / norm.clamp(min=torch.finfo(norm.dtype).tiny), importance)
    return importance.numpy()


def importance_files(importance: np.ndarray, target: ClassifierTarget, normalize: bool) -> dict[str, object]:
    """``ablation-importance.json`` (the [L,H] grid and what it was computed on) and its heatmap, by file name."""
    from probes.results.plots import heatmap_png
    from probes.base.files import short_model_name

    kind = "normalised per layer (ℓ2)" if normalize else "not normalised"
    data = {"model": target.name, "corpus": target.files, "examples": target.scored,
            "skipped": dict(target.skipped), "normalize": normalize, "importance": importance.tolist()}
    png = heatmap_png(importance, f"head importance E|dL/dξ|, {kind}",
                      f"{short_model_name(target.name)} · n={target.scored}", vmin=0.0,
                      vmax=float(np.nanmax(importance)) or 1.0)
    return {"ablation-importance.json": data, "ablation-importance.png": png}
