"""Keep TensorFlow's harmless start-up lines out of the notebook, and show everything else.

Why: on a machine without a GPU, ``import tensorflow`` and the first device query
print lines from C++ straight to file descriptor 2, before TensorFlow's own
log settings apply (TF 2.21 prints them even with ``TF_CPP_MIN_LOG_LEVEL=3``)::

    WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
    I0000 ... cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will not be used.
    E0000 ... cuda_platform.cc:52] failed call to cuInit: ... UNKNOWN ERROR (303)

JupyterLab shows them as red boxes in every Setup cell, although nothing is wrong.
:func:`filtered_native_stderr` captures descriptor 2 around that start-up, drops
exactly these known lines, and writes every other line back to stderr, so a real
problem is never hidden. TROUBLESHOOTING.md explains the lines for anyone who
meets them elsewhere (a script, a subprocess's log).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import threading
from contextlib import contextmanager
from typing import Iterator, Sequence

#: Start-up lines that carry no information on a machine without a usable GPU.
HARMLESS = (
    r"All log messages before absl::InitializeLog\(\) is called are written to STDERR",
    r"cudart_stub\.cc:\d+\] Could not find cuda drivers on your machine",
    r"port\.cc:\d+\] oneDNN custom operations are on",
    r"Unable to register cu(DNN|FFT|BLAS) factory",
    r"computation placer already registered",
    r"TF-TRT Warning: Could not find TensorRT",
    r"This TensorFlow binary is optimized to use available CPU instructions",
    r"To enable the following instructions: .* in other operations, rebuild TensorFlow",
    # grappler on TF 2.20 when a graph holds a tf.cond (lesson 03's tower model): a note about an optimisation
    r"loop_optimizer\.cc:\d+\] Skipping loop optimization for Merge node with control input",
)
#: Only harmless when this machine has no NVIDIA driver at all (no ``nvidia-smi``).
HARMLESS_WITHOUT_DRIVER = (r"failed call to cuInit: .*(UNKNOWN ERROR \(303\)|CUDA_ERROR_NO_DEVICE)",)


def harmless_patterns() -> tuple[str, ...]:
    """The patterns that apply on this machine (cuInit failures count only without an NVIDIA driver)."""
    return HARMLESS + (HARMLESS_WITHOUT_DRIVER if shutil.which("nvidia-smi") is None else ())


def keep_lines(text: str, patterns: Sequence[str]) -> str:
    """``text`` without the lines that match any of ``patterns``."""
    if isinstance(patterns, str):
        raise ValueError("patterns must be a sequence of regex strings, not one string")
    compiled = [re.compile(p) for p in patterns]
    return "".join(ln for ln in text.splitlines(keepends=True) if not any(c.search(ln) for c in compiled))


@contextmanager
def filtered_native_stderr(patterns: Sequence[str] | None = None) -> Iterator[None]:
    """Capture file descriptor 2 inside the block; afterwards re-emit it without the harmless lines."""
    patterns = harmless_patterns() if patterns is None else patterns
    keep_lines("", patterns)  # validates patterns before touching descriptors
    sys.stderr.flush()
    with tempfile.TemporaryFile(mode="w+b") as sink:
        saved = os.dup(2)
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            rest = keep_lines(sink.read().decode("utf-8", "replace"), patterns)
            if rest:
                sys.stderr.write(rest)
                sys.stderr.flush()


_pump: "threading.Thread | None" = None


def install_native_filter(patterns: Sequence[str] | None = None) -> bool:
    """Filter file descriptor 2 for the rest of the process: harmless lines dropped, all others passed on.

    TensorFlow and XLA log from C++ at any time, not only at start-up (TF 2.20 prints
    ``W0000 ... loop_optimizer.cc ...`` notes and the absl line again in the middle of a
    lesson). In a notebook kernel, descriptor 2 is what JupyterLab shows as red boxes.
    This routes descriptor 2 through a pipe; a daemon thread forwards every complete
    line that matches none of ``patterns`` to the original descriptor. Returns False
    (and does nothing) when already installed.
    """
    global _pump
    patterns = harmless_patterns() if patterns is None else tuple(patterns)
    keep_lines("", patterns)
    if _pump is not None:
        return False
    compiled = [re.compile(p) for p in patterns]
    read_end, write_end = os.pipe()
    original = os.dup(2)
    sys.stderr.flush()
    os.dup2(write_end, 2)
    os.close(write_end)

    def pump() -> None:
        pending = b""
        while True:
            chunk = os.read(read_end, 65536)
            if not chunk:
                break
            pending += chunk
            *lines, pending = pending.split(b"\n")
            kept = [ln for ln in lines if not any(c.search(ln.decode("utf-8", "replace")) for c in compiled)]
            if kept:
                os.write(original, b"\n".join(kept) + b"\n")
        if pending:
            os.write(original, pending)

    _pump = threading.Thread(target=pump, name="native-stderr-filter", daemon=True)
    _pump.start()
    return True
