"""Hooks on a model's modules, added together and removed together whatever happens (TransformerLens'
``hooks()`` context manager): ``HookSet`` for a block of code, ``Hooked`` for a class whose instances are the
context (the head masker, the shared prefix, the gates, the norm-based weights).

    with HookSet() as hooks:
        hooks.forward(module, read)              # module.register_forward_hook(read)
        hooks.pre(module, ask, with_kwargs=True)  # module.register_forward_pre_hook(ask, with_kwargs=True)
        model(...)

A hook fires only in the thread that added it: two threads that run one model, each inside its own context, see
only their own hooks' effects.
"""
from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from functools import wraps
from typing import Callable

import torch


def in_this_thread(hook: Callable) -> Callable:
    """`hook`, called only in the thread that wraps it; elsewhere it does nothing (returns None: no change)."""
    owner = threading.get_ident()

    @wraps(hook)
    def owned(*args, **kwargs):
        return hook(*args, **kwargs) if threading.get_ident() == owner else None
    return owned


class HookSet:
    """The hooks one context adds, removed together (last added first) when it ends; each fires only in the thread
    that added it."""

    def __init__(self) -> None:
        self._handles: list = []

    def forward(self, module: torch.nn.Module, hook: Callable, *, prepend: bool = False,
                with_kwargs: bool = False) -> None:
        """A forward hook on `module` (``prepend``: before the hooks it has; ``with_kwargs``: it sees the keyword
        arguments, ``hook(module, args, kwargs, output)``)."""
        self._handles.append(module.register_forward_hook(in_this_thread(hook), prepend=prepend,
                                                          with_kwargs=with_kwargs))

    def pre(self, module: torch.nn.Module, hook: Callable, *, with_kwargs: bool = False) -> None:
        """A forward pre-hook on `module` (``with_kwargs``: it sees and may change the keyword arguments)."""
        self._handles.append(module.register_forward_pre_hook(in_this_thread(hook), with_kwargs=with_kwargs))

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
