"""probes.allocator: with glibc's mmap threshold fixed at 1 MB, a 4 MB tensor is its own mapping every time it is
made (returned to the system when freed) and a 512 KB one never is (the heap's memory, reused); with glibc's dynamic
threshold, only the first 4 MB one is, the later ones come from the heap. Counted with glibc's mallinfo2 (hblks:
mapped blocks) in fresh processes."""
from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
COUNT = """
import ctypes, sys
import torch

class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                               "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
if sys.argv[1] == "fixed":
    import probes.runner  # fixes the threshold at import

def mapped_while_alive():
    before = libc.mallinfo2().hblks
    block = torch.ones(int(sys.argv[2]) << 8)  # float32: argv[2] KB
    return libc.mallinfo2().hblks - before

print(*[mapped_while_alive() for _ in range(3)])
"""


def _glibc_with_mallinfo2() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    process = ctypes.CDLL(None)
    return hasattr(process, "gnu_get_libc_version") and hasattr(process, "mallinfo2")


@pytest.mark.skipif(not _glibc_with_mallinfo2(), reason="glibc 2.33+ only (mallinfo2)")
@pytest.mark.parametrize("threshold, kilobytes, mapped", [("dynamic", 4096, "1 0 0"), ("fixed", 4096, "1 1 1"),
                                                       ("fixed", 512, "0 0 0")])
def test_large_blocks_are_mapped_alone_once_a_run_is_imported(threshold, kilobytes, mapped):
    # 4 MB: above the fixed 1 MB and below glibc's 32 MB ceiling of its dynamic threshold
    done = subprocess.run([sys.executable, "-c", COUNT, threshold, str(kilobytes)], capture_output=True, text=True,
                          check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.stdout.split() == mapped.split()
