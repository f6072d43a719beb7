"""helpers.gpus: nvidia-smi CSV parsing, CUDA_VISIBLE_DEVICES checking and mapping, the CUDA probe."""

import shutil

import pytest

from helpers import gpus
from helpers.gpus import GpuInfo, parse_cuda_visible_devices, parse_nvidia_smi_csv

# ---- nvidia-smi CSV ---------------------------------------------------------------------------

REAL_LOOKING = """index, uuid, pci.bus_id, name, memory.used [MiB], memory.total [MiB]
0, GPU-0a1b2c3d-0000-1111-2222-333344445555, 00000000:00:04.0, Tesla T4, 3 MiB, 15360 MiB
"""


def test_parse_single_row():
    (row,) = parse_nvidia_smi_csv(REAL_LOOKING)
    assert row == GpuInfo(0, "GPU-0a1b2c3d-0000-1111-2222-333344445555", "00000000:00:04.0",
                          "Tesla T4", 3, 15360)
    assert row.memory_free_mib == 15357


MIXED = """index, uuid, pci.bus_id, name, memory.used [MiB], memory.total [MiB]
0, GPU-1f2e3d4c-5b6a-4978-8695-a4b3c2d1e0f9, 00000000:01:00.0, NVIDIA GeForce GTX 1080 Ti, 312 MiB, 11264 MiB
1, GPU-2a3b4c5d-6e7f-4a8b-9c0d-1e2f3a4b5c6d, 00000000:02:00.0, NVIDIA GeForce RTX 3090, 1 MiB, 24576 MiB
"""


def test_parse_sample_and_mixed_sample():
    rows = parse_nvidia_smi_csv(gpus.SAMPLE_NVIDIA_SMI_CSV)
    assert [r.index for r in rows] == list(range(8))
    assert len({r.uuid for r in rows}) == 8 and len({r.pci_bus_id for r in rows}) == 8
    assert all(r.memory_total_mib == 16160 for r in rows)
    mixed = parse_nvidia_smi_csv(MIXED)
    assert len({r.name for r in mixed}) == 2


def test_parse_nounits_na_and_unknown_columns():
    text = ("index, name, memory.used [MiB], memory.total [MiB], temperature.gpu\n"
            "0, A100, 12, 40960, 31\n1, A100, [N/A], 40960, 30\n")
    rows = parse_nvidia_smi_csv(text)
    assert rows[0].memory_used_mib == 12 and rows[0].name == "A100"   # temperature.gpu: ignored
    assert rows[1].memory_used_mib is None and rows[1].memory_free_mib is None
    assert rows[0].uuid is None


def test_parse_header_only_means_no_gpu():
    assert parse_nvidia_smi_csv("index, name\n") == []


@pytest.mark.parametrize("text, match", [
    ("", "empty"),
    ("   \n\n", "empty"),
    ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", "no 'index' column"),
    ("0, Tesla T4, 3 MiB\n", "no 'index' column"),
    ("index, name\n0, T4, extra\n", "line 2: expected 2 comma-separated fields"),
    ("index, name\nzero, T4\n", "index should be a whole number"),
    ("index, name\n0, T4\n0, T4\n", "appears twice"),
    ("index, memory.used [MiB]\n0, lots MiB\n", "number of MiB"),
])
def test_parse_malformed(text, match):
    with pytest.raises(ValueError, match=match):
        parse_nvidia_smi_csv(text)


def test_parse_not_a_string():
    with pytest.raises(ValueError, match="CSV text"):
        parse_nvidia_smi_csv(b"index\n")


def test_read_nvidia_smi_reports_why(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    text, why = gpus.read_nvidia_smi()
    assert text is None and "not installed" in why


def test_read_nvidia_smi_real_or_missing():
    text, why = gpus.read_nvidia_smi()
    if shutil.which("nvidia-smi") is None:
        assert text is None
    elif text is not None:
        assert isinstance(parse_nvidia_smi_csv(text), list)
    assert why


@pytest.mark.parametrize("raw, norm", [("00000000:1A:00.0", "0000:1a:00.0"), ("0000:1a:00.0", "0000:1a:00.0"),
                                       ("00000001:B2:1F.7", "0001:b2:1f.7")])
def test_normalize_bus_id(raw, norm):
    assert gpus.normalize_bus_id(raw) == norm


@pytest.mark.parametrize("bad", ["1A:00.0", "bus 3", "", None])
def test_normalize_bus_id_bad(bad):
    with pytest.raises(ValueError):
        gpus.normalize_bus_id(bad)


# ---- CUDA_VISIBLE_DEVICES ---------------------------------------------------------------------

@pytest.mark.parametrize("value, entries", [
    (None, None), ("", []), ("-1", []), ("0", [0]), ("3,5", [3, 5]), ("5,3", [5, 3]),
    ("GPU-8932f937", ["GPU-8932f937"]), ("1,GPU-8932f937-d72c", [1, "GPU-8932f937-d72c"]),
    ("MIG-1a2b", ["MIG-1a2b"]),
])
def test_parse_cvd_ok(value, entries):
    assert parse_cuda_visible_devices(value) == entries


@pytest.mark.parametrize("value, match", [
    ("3,,5", "entry 2 is empty"), (",3", "entry 1 is empty"), ("3,", "entry 2 is empty"),
    ("gpu3", "neither a GPU index"), ("GPU3", "neither a GPU index"), ("0-2", "neither a GPU index"),
    ("3,3", "listed twice"), ("03,3", "listed twice"), ("3, 5", "without spaces"),
    ("0,-1", "'-1' alone"), ("-2", "not a GPU index"), (3, "string"),
])
def test_parse_cvd_malformed(value, match):
    with pytest.raises(ValueError, match=match):
        parse_cuda_visible_devices(value)


def test_resolve_visible_counts_follow_cuda_rules():
    assert gpus.resolve_visible(None, 4).visible == (0, 1, 2, 3)
    assert gpus.resolve_visible("3,5", 8).visible == (3, 5)
    assert gpus.resolve_visible("3,5", 8).tf_names == {3: "/GPU:0", 5: "/GPU:1"}   # renumbered in list order
    assert gpus.resolve_visible("5,3,0", 8).tf_names == {5: "/GPU:0", 3: "/GPU:1", 0: "/GPU:2"}
    one = gpus.resolve_visible("3,5", 1)  # CUDA stops at the first index it cannot use
    assert one.visible == () and one.dropped == (3, 5)
    part = gpus.resolve_visible("1,5,0", 4)
    assert part.visible == (1,) and part.dropped == (5, 0)
    assert gpus.resolve_visible("", 8).visible == () and gpus.resolve_visible("-1", 0).visible == ()
    assert gpus.resolve_visible("0", 0).visible == ()


def test_resolve_visible_by_uuid_prefix():
    rows = parse_nvidia_smi_csv(gpus.SAMPLE_NVIDIA_SMI_CSV)
    assert gpus.resolve_visible(rows[6].uuid, rows).visible == (6,)
    assert gpus.resolve_visible(rows[6].uuid[:12] + ",2", rows).visible == (6, 2)
    assert gpus.resolve_visible("GPU-ffff", rows).dropped == ("GPU-ffff",)
    with pytest.raises(ValueError, match="GpuInfo"):
        gpus.resolve_visible("0", ["GPU-1"])
    with pytest.raises(ValueError, match=">= 0"):
        gpus.resolve_visible("0", -1)
    with pytest.raises(ValueError):
        gpus.resolve_visible("0", True)


# ---- CUDA probe (fresh processes, no TensorFlow: fast) ----------------------------------------

def test_probe_cuda_hidden_and_consistent():
    everything = gpus.probe_cuda()
    hidden = gpus.probe_cuda({"CUDA_VISIBLE_DEVICES": ""})
    assert hidden.count == 0 and hidden.env == {"CUDA_VISIBLE_DEVICES": ""}
    assert "CUDA_VISIBLE_DEVICES=''" in hidden.summary() and "0 GPUs" in hidden.summary()
    if everything.driver is None:
        assert everything.count == 0 and "no CUDA driver" in everything.error
    first = gpus.probe_cuda({"CUDA_VISIBLE_DEVICES": "0"})
    assert first.count == min(1, everything.count)


def test_probe_cuda_bad_env():
    with pytest.raises(ValueError, match="strings"):
        gpus.probe_cuda({"CUDA_VISIBLE_DEVICES": 3})


def _view(devices):
    return gpus.CudaView(env={}, devices=tuple(devices), driver="libcuda.so.1", error=None)


def test_compare_numbering_matches_by_bus_id():
    smi = parse_nvidia_smi_csv(MIXED)
    gtx = {"name": smi[0].name, "pci_bus_id": "0000:01:00.0", "uuid": smi[0].uuid}
    rtx = {"name": smi[1].name, "pci_bus_id": "0000:02:00.0", "uuid": smi[1].uuid}
    fastest = _view([dict(rtx, ordinal=0), dict(gtx, ordinal=1)])   # the faster card first
    pci = _view([dict(gtx, ordinal=0), dict(rtx, ordinal=1)])
    rows = gpus.compare_numbering(smi, fastest, pci)
    assert [(r["nvidia-smi"], r["CUDA (FASTEST_FIRST)"], r["CUDA (PCI_BUS_ID)"]) for r in rows] == [(0, 1, 0), (1, 0, 1)]
    assert [g.index for g in pci.as_gpu_info()] == [0, 1] and pci.as_gpu_info()[1].name == smi[1].name
    assert gpus.resolve_visible(smi[1].uuid[:12], pci.as_gpu_info()).visible == (1,)
    missing = gpus.compare_numbering(smi, _view([]), pci)
    assert all(r["CUDA (FASTEST_FIRST)"] is None for r in missing)


def test_probe_cuda_reports_a_broken_child(monkeypatch):
    from helpers import subproc

    monkeypatch.setattr(subproc, "run", lambda *a, **k: subproc.Result(1, "", "Traceback ...\nOSError: boom\n"))
    with pytest.raises(RuntimeError, match="OSError: boom"):
        gpus.probe_cuda()


def test_visible_gpu_ids_one_reading_for_launchers():
    rows = gpus.parse_nvidia_smi_csv(gpus.SAMPLE_NVIDIA_SMI_CSV)          # 8 GPUs
    assert gpus.visible_gpu_ids(None, rows) == [str(i) for i in range(8)]
    assert gpus.visible_gpu_ids("2,3", rows) == ["2", "3"]
    assert gpus.visible_gpu_ids("-1", rows) == [] and gpus.visible_gpu_ids("", rows) == []
    assert gpus.visible_gpu_ids("3,9,5", rows) == ["3"]                    # CUDA stops at the first bad entry
    assert gpus.visible_gpu_ids("3,5", []) == ["3", "5"]                   # no nvidia-smi: as written
    with pytest.raises(ValueError, match="entry 2 is empty"):
        gpus.visible_gpu_ids("3,,5", rows)


def test_visible_gpu_ids_reads_the_environment(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert gpus.visible_gpu_ids(gpus=[]) == ["2", "3"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    assert gpus.visible_gpu_ids(gpus=[]) == []


def test_the_cuda_probe_is_a_script_that_runs_on_its_own(capsys):
    """probe_cuda runs helpers/scripts/cuda_probe.py; as a file it prints the same one line, imported nothing."""
    import json
    import subprocess
    import sys

    run = subprocess.run([sys.executable, str(gpus.CUDA_PROBE_SCRIPT)], capture_output=True, text=True,
                         timeout=60, env={"CUDA_VISIBLE_DEVICES": "", "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stderr
    data = json.loads(run.stdout.split("CUDA_PROBE ", 1)[1])
    assert data["CUDA_VISIBLE_DEVICES"] == "" and data["devices"] == [] and data["error"]
    from helpers import subproc

    subproc.load_script(gpus.CUDA_PROBE_SCRIPT)  # importing it probes nothing and prints nothing
    assert capsys.readouterr().out == ""
