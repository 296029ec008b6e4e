"""The C allocator's setting for a run: large blocks go straight back to the system when freed.

A run allocates and frees the same few large tensors once per layer (one layer's [B,H,T,T] maps and
their temporaries, hundreds of MB for long inputs). glibc serves blocks above its mmap threshold with
mmap and returns them with munmap on free, but raises that threshold to the size of every such block
freed (its dynamic threshold): from the first layer on, the maps come from the heap, whose freed
space is kept and fragments, so the resident memory grows with the layers and time goes to managing
it. ``return_large_blocks`` fixes the threshold at LARGE_BLOCK bytes (mallopt(M_MMAP_THRESHOLD), what
the environment variable MALLOC_MMAP_THRESHOLD_ does when set before the process starts), so every
large tensor is its own mapping, returned whole when freed. Elsewhere than Linux with glibc it does
nothing. Scores do not depend on it.
"""
from __future__ import annotations

import ctypes
import sys

M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter number (malloc.h)
LARGE_BLOCK = 1 << 20  # bytes: blocks of at least this size are mapped alone and unmapped when freed


def return_large_blocks() -> bool:
    """Fix glibc's mmap threshold at LARGE_BLOCK for this process; True where it was set (Linux, glibc)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        process = ctypes.CDLL(None)  # the symbols of the running process, its C library's among them
    except OSError:
        return False
    # gnu_get_libc_version is glibc's own: absent from musl and the others, whose mallopt differs
    if not hasattr(process, "gnu_get_libc_version") or not hasattr(process, "mallopt"):
        return False
    return bool(process.mallopt(M_MMAP_THRESHOLD, LARGE_BLOCK))
