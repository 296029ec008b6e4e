"""Hooks on a model's modules, added together and removed together whatever happens (TransformerLens'
``hooks()`` context manager): ``HookSet`` for a block of code, ``Hooked`` for a class whose instances are the
context (the head masker, the shared prefix, the gates, the norm-based weights).

    with HookSet() as hooks:
        hooks.forward(module, read)              # module.register_forward_hook(read)
        hooks.pre(module, ask, with_kwargs=True)  # module.register_forward_pre_hook(ask, with_kwargs=True)
        model(...)
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Callable

import torch


class HookSet:
    """The hooks one context adds, removed together (last added first) when it ends."""

    def __init__(self) -> None:
        self._handles: list = []

    def forward(self, module: torch.nn.Module, hook: Callable, *, prepend: bool = False,
                with_kwargs: bool = False) -> None:
        """A forward hook on `module` (``prepend``: before the hooks it has; ``with_kwargs``: it sees the keyword
        arguments, ``hook(module, args, kwargs, output)``)."""
        self._handles.append(module.register_forward_hook(hook, prepend=prepend, with_kwargs=with_kwargs))

    def pre(self, module: torch.nn.Module, hook: Callable, *, with_kwargs: bool = False) -> None:
        """A forward pre-hook on `module` (``with_kwargs``: it sees and may change the keyword arguments)."""
        self._handles.append(module.register_forward_pre_hook(hook, with_kwargs=with_kwargs))

    def remove(self) -> None:
        while self._handles:
            self._handles.pop().remove()

    def __enter__(self) -> HookSet:
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


class Hooked(ABC):
    """A context manager whose hooks (``add_hooks``) are added on entry and removed on exit, after which its
    per-pass state is forgotten (``clear``)."""

    _hooks: HookSet | None = None

    @abstractmethod
    def add_hooks(self, hooks: HookSet) -> None:
        """Add this context's hooks to `hooks`."""

    def clear(self) -> None:
        """Forget what the passes inside the context left behind (nothing by default)."""

    def __enter__(self):
        self._hooks = HookSet()
        try:
            self.add_hooks(self._hooks)
        except BaseException:
            self._hooks.remove()
            raise
        return self

    def __exit__(self, *exc) -> None:
        if self._hooks is not None:
            self._hooks.remove()
        self.clear()
