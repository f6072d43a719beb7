"""Keep TensorFlow's harmless start-up lines out of the notebook, and show everything else.

Why: without a GPU, ``import tensorflow`` prints lines from C++ straight to file descriptor 2 (even
with ``TF_CPP_MIN_LOG_LEVEL=3`` on TF 2.21), and JupyterLab shows them as red boxes although nothing is
wrong. This drops exactly the known lines and writes every other line back, so no real problem is
hidden; TROUBLESHOOTING.md explains the lines.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import threading
from contextlib import contextmanager
from typing import Iterator

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
    # a mask (a bool tensor) on a CPU without AVX-512 (lesson 03's masked GRU): TensorFlow uses its own kernel
    r"oneDNN supports DT_BOOL only on platforms with AVX-512\. Falling back to the default Eigen-based implementation",
)
#: Only harmless when this machine has no NVIDIA driver at all (no ``nvidia-smi``).
HARMLESS_WITHOUT_DRIVER = (r"failed call to cuInit: .*(UNKNOWN ERROR \(303\)|CUDA_ERROR_NO_DEVICE)",)


def harmless_patterns() -> tuple[str, ...]:
    """The patterns that apply on this machine (cuInit failures count only without an NVIDIA driver)."""
    return HARMLESS + (HARMLESS_WITHOUT_DRIVER if shutil.which("nvidia-smi") is None else ())


def _harmless_re() -> re.Pattern:
    return re.compile("|".join(f"(?:{p})" for p in harmless_patterns()))


def keep_lines(text: str) -> str:
    """``text`` without the lines that match one of :func:`harmless_patterns`."""
    harmless = _harmless_re()
    return "".join(ln for ln in text.splitlines(keepends=True) if not harmless.search(ln))


@contextmanager
def filtered_native_stderr() -> Iterator[None]:
    """Capture file descriptor 2 inside the block; afterwards write it back without the harmless lines."""
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
            sys.stderr.write(keep_lines(sink.read().decode("utf-8", "replace")))
            sys.stderr.flush()


_pump: "threading.Thread | None" = None


def install_native_filter() -> bool:
    """Filter file descriptor 2 for the rest of the process (TF logs from C++ at any time): a daemon thread forwards
    each line that is not harmless from a pipe to the original descriptor. False when already installed."""
    global _pump
    if _pump is not None:
        return False
    harmless = _harmless_re()
    read_end, write_end = os.pipe()
    original = os.dup(2)
    sys.stderr.flush()
    os.dup2(write_end, 2)
    os.close(write_end)

    def pump() -> None:
        pending = b""
        while chunk := os.read(read_end, 65536):
            *lines, pending = (pending + chunk).split(b"\n")
            kept = [ln for ln in lines if not harmless.search(ln.decode("utf-8", "replace"))]
            if kept:
                os.write(original, b"\n".join(kept) + b"\n")
        if pending:
            os.write(original, pending)

    _pump = threading.Thread(target=pump, name="native-stderr-filter", daemon=True)
    _pump.start()
    return True
