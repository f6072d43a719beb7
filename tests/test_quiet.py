"""helpers.quiet: harmless native start-up lines are dropped, everything else is shown."""

import os
import subprocess
import sys

import pytest

from helpers import quiet

NOISE = ("WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
         "I0000 00:00:1796100162.248259    5823 cudart_stub.cc:31] Could not find cuda drivers on your machine, "
         "GPU will not be used.\n"
         "E0000 00:00:1796100171.944601    5823 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: "
         "Failed call to cuInit: UNKNOWN ERROR (303)\n")


def test_keep_lines_drops_only_matches(monkeypatch):
    text = NOISE + "E0000 something real went wrong\n"
    monkeypatch.setattr(quiet.shutil, "which", lambda name: None)       # no driver: cuInit is harmless
    assert quiet.keep_lines(text) == "E0000 something real went wrong\n"
    monkeypatch.setattr(quiet.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    assert "cuInit" in quiet.keep_lines(text) and "cudart_stub" not in quiet.keep_lines(text)


def test_cuinit_is_harmless_only_without_a_driver(monkeypatch):
    monkeypatch.setattr(quiet.shutil, "which", lambda name: None)
    assert any("cuInit" in p for p in quiet.harmless_patterns())
    monkeypatch.setattr(quiet.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    assert not any("cuInit" in p for p in quiet.harmless_patterns())


def test_filtered_native_stderr_on_file_descriptor_2():
    code = ("import os, sys\nfrom helpers.quiet import filtered_native_stderr\n"
            "with filtered_native_stderr():\n"
            f"    os.write(2, {NOISE.encode()!r})\n"
            "    os.write(2, b'E0000 keep me\\n')\n"
            "os.write(2, b'after\\n')\n")
    env = dict(os.environ, PATH="/usr/bin:/bin")   # no nvidia-smi on this PATH: cuInit counts as harmless
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stderr == "E0000 keep me\nafter\n"


@pytest.mark.slow
def test_importing_tensorflow_through_helpers_is_quiet():
    env = {k: v for k, v in os.environ.items() if not k.startswith("TF_CPP")}
    code = "from helpers.devices import ensure_devices; ensure_devices(2)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    for noise in ("absl::InitializeLog", "cudart_stub", "cuInit"):
        assert noise not in r.stderr, r.stderr


def test_install_native_filter_keeps_filtering_after_start_up():
    code = ("import os, sys, time\nfrom helpers.quiet import install_native_filter\n"
            "assert install_native_filter()\n"
            "assert not install_native_filter()      # once per process\n"
            "os.write(2, b'WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\\n')\n"
            "os.write(2, b'W0000 loop_optimizer.cc:934] Skipping loop optimization for Merge node with '\n"
            "         b'control input: m\\n')\n"
            "os.write(2, b'E0000 util.cc:131] oneDNN supports DT_BOOL only on platforms with AVX-512. Falling back '\n"
            "         b'to the default Eigen-based implementation if present.\\n')\n"
            "os.write(2, b'E0000 a real error\\n')\n"
            "os.write(2, b'partial ')\nos.write(2, b'line\\n')\n"
            "time.sleep(0.5)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stderr == "E0000 a real error\npartial line\n"
