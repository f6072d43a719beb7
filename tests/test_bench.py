"""helpers.bench: configuration checks, the report, the benchmark script (in this process and in a child) and the CLI."""

import csv
import math

import benchmark  # tools/benchmark.py: `make bench`
import pytest

from helpers import bench, precision, subproc

TINY = dict(steps=2, warmup=1, batch_per_replica=8, input_shape=(4, 4, 1), width=2)


# -- configuration ------------------------------------------------------------------------------

def test_make_config_defaults_are_valid_and_mode_aware(monkeypatch):
    monkeypatch.setenv("MULTIGPU_MODE", "quick")
    quick = bench.make_config()
    monkeypatch.setenv("MULTIGPU_MODE", "full")
    full = bench.make_config()
    assert quick.replicas == (1, 2, 4) and quick.ways == bench.WAYS
    assert full.steps > quick.steps and full.input_shape == (32, 32, 3)
    assert bench.make_config(replicas=[1, 2]).replicas == (1, 2)   # lists become tuples


@pytest.mark.parametrize("overrides, match", [
    (dict(replicas=(0,)), "each replica count must be an int >= 1"),
    (dict(replicas=()), "distinct replica counts"),
    (dict(replicas=(1, 1)), "distinct replica counts"),
    (dict(replicas=(1, 2.0)), "int >= 1"),
    (dict(steps=0), "steps must be an int >= 1"),
    (dict(warmup=0), "warmup must be an int >= 1"),
    (dict(batch_per_replica=0), "batch_per_replica"),
    (dict(ways=("one_device", "horovod")), "distinct names from"),
    (dict(ways=()), "distinct names from"),
    (dict(ways=("mirrored",)), "with 'one_device'"),
    (dict(ways=("one_device", "one_device")), "distinct names from"),
    (dict(input_shape=(8, 8)), "input_shape"),
    (dict(num_classes=1), "num_classes"),
    (dict(policy=16), "policy"),
    (dict(timeout=0), "timeout"),
    (dict(speed="fast"), "unknown setting"),
])
def test_make_config_rejects_bad_settings(overrides, match):
    with pytest.raises(ValueError, match=match):
        bench.make_config(**overrides)


# -- arithmetic -----------------------------------------------------------------------------------

def test_speedup_limit_and_explanations():
    assert bench.speedup_limit("GPUs", 4) == 4
    assert bench.speedup_limit("GPU 0 split into logical GPUs", 4) == 1
    assert bench.speedup_limit("CPU split into logical CPUs", 4) == 1
    cpu = bench.explain_hardware("CPU split into logical CPUs", 2)
    assert "same cores" in cpu and "physical limit is 1x" in cpu
    # honest on both sides of 1x: below is the cost of replication, above is idle cores put to work
    assert "below it are the cost of replication" in cpu and "idle cores of the same CPU" in cpu
    assert "not from extra hardware" in cpu and "not a speed-up" not in cpu
    gpu = bench.explain_hardware("GPU 0 split into logical GPUs", 2)
    assert "ONE GPU" in gpu and "idle parts of the same chip" in gpu
    assert "up to 8x" in bench.explain_hardware("GPUs", 8)
    with pytest.raises(ValueError, match="replicas"):
        bench.speedup_limit("GPUs", 0)


# -- the report (from hand-made measurements) ----------------------------------------------------

def _m(way, n, sps, kind="CPU split into logical CPUs"):
    used = 1 if way == "one_device" else n
    devs = [f"/device:CPU:{i}" for i in range(used)]
    if sps is None:
        nan = float("nan")
        return bench.Measurement(way, n, 0, 10 * n, nan, nan, nan, 0, devs, kind, "", "n/a: test")
    return bench.Measurement(way, n, used, 10 * n, sps, sps * 0.9, sps * 1.1, 5, devs, kind, "float32")


def _report():
    ms = [_m("one_device", 1, 100.0), _m("towers", 1, None), _m("mirrored", 1, 90.0),
          _m("one_device", 2, 150.0), _m("towers", 2, 100.0), _m("mirrored", 2, 120.0)]
    return bench.BenchReport(ms, bench.make_config(replicas=(1, 2)))


def test_report_rows_speed_up_efficiency_and_ratio():
    report = _report()
    rows = {(r["way"], r["replicas"]): r for r in report.rows()}
    assert len(rows) == 6
    assert rows[("one_device", 2)]["speed_up"] == 1.0
    assert rows[("mirrored", 2)]["speed_up"] == pytest.approx(120 / 150)
    assert rows[("mirrored", 2)]["efficiency"] == pytest.approx(120 / 150 / 2)
    assert rows[("mirrored", 2)]["vs_1_replica"] == pytest.approx(1.2)
    assert rows[("mirrored", 2)]["speedup_limit"] == 1
    assert math.isnan(rows[("towers", 1)]["speed_up"])
    assert report.mirrored_vs_towers() == {2: pytest.approx(1.2)}
    text = report.summary()
    assert "n/a" in text and "MirroredStrategy / towers throughput: 1.20x" in text
    assert "same cores" in text and "/device:CPU:1" in text


def test_report_get_and_baseline_errors():
    report = _report()
    with pytest.raises(ValueError, match="no measurement"):
        report.get("mirrored", 8)
    broken = bench.BenchReport([_m("one_device", 1, None), _m("mirrored", 1, 90.0)],
                               bench.make_config(replicas=(1,)))
    with pytest.raises(ValueError, match="baseline"):
        broken.rows()


def test_report_csv_and_plot(tmp_path):
    import matplotlib.pyplot as plt

    paths = benchmark.write_outputs(_report(), tmp_path / "out")
    with open(paths["csv"]) as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 6 and {"way", "replicas", "samples_per_s", "speed_up", "efficiency"} <= set(rows[0])
    assert paths["png"].stat().st_size > 1000
    fig = _report().plot()
    assert len(fig.axes) == 2 and fig.axes[1].get_ylabel() == "speed-up"
    plt.close(fig)


# -- the command line (`make bench`): the lesson's script in fresh processes --------------------------

@pytest.mark.slow
def test_cli_writes_csv_and_png_in_a_quick_configuration(tmp_path, capsys, monkeypatch):
    """One real child process (2 replicas, all three ways, a mixed policy), as `make bench` runs it."""
    monkeypatch.setenv("MULTIGPU_MODE", "quick")
    out = tmp_path / "bench"
    code = benchmark.main(["--out", str(out), "--replicas", "2", "--steps", "2", "--policy", "mixed_bfloat16"])
    assert code == 0
    text = capsys.readouterr().out
    assert "2 replica(s): a fresh process runs bench_child.py" in text
    assert "MirroredStrategy / towers throughput" in text
    with open(out / "bench.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["way"] for r in rows} == set(bench.WAYS)
    assert all(float(r["samples_per_s"]) > 0 and float(r["efficiency"]) > 0 for r in rows)
    mirrored = [r for r in rows if r["way"] == "mirrored"][0]
    assert len(set(mirrored["devices"].split())) == 2 and mirrored["replica_kind"]
    assert {r["policy"] for r in rows} == {"mixed_bfloat16"}          # --policy reached the script
    assert (out / "bench.png").stat().st_size > 1000


@pytest.mark.parametrize("argv, match", [
    (["--out", "x", "--replicas", "0"], "replica count must be an int >= 1"),
    (["--out", "x", "--steps", "0"], "steps must be an int >= 1"),
    (["--out", "x", "--policy", "mixed", "--replicas", "1", "1"], "distinct replica counts"),
    (["--replicas", "2"], "the following arguments are required: --out"),
])
def test_cli_rejects_bad_arguments_before_starting_children(argv, match, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(bench, "run_script", lambda *a, **k: pytest.fail("no child may start"))
    with pytest.raises(SystemExit) as info:
        benchmark.main(argv)
    assert match in str(info.value) + capsys.readouterr().err
    assert not (tmp_path / "x").exists()


# -- the notebook's side: a benchmark script, its results, the report -----------------------------

def _result(way="mirrored", n=2, rates=(100.0, 120.0, 80.0), kind="CPU split into logical CPUs", gpus=()):
    used = [f"/device:CPU:{i}" for i in range(1 if way == "one_device" else n)]
    return {"way": way, "replicas": n, "devices": used, "global_batch": 8 * n, "samples_per_s": list(rates),
            "kind": kind, "gpus": list(gpus), "policy": "float32"}


def test_to_measurement_takes_median_and_range_and_names_the_hardware():
    m = bench.to_measurement(_result())
    assert (m.samples_per_s, m.min_samples_per_s, m.max_samples_per_s, m.steps) == (100.0, 80.0, 120.0, 3)
    assert m.hardware == "1 CPU split in 2" and m.devices_used == 2 and m.available
    gpu = bench.to_measurement(_result(kind="GPUs", gpus=["Tesla T4", "Tesla T4"]))
    assert gpu.hardware == "2 x Tesla T4"
    split = bench.to_measurement(_result(kind="GPU 0 split into logical GPUs", gpus=["Tesla T4"]))
    assert split.hardware == "1 x Tesla T4 split in 2"
    one = bench.to_measurement(_result("one_device", kind="GPU 0 split into logical GPUs", gpus=["Tesla T4"]))
    assert one.hardware == "a part of 1 x Tesla T4"


@pytest.mark.parametrize("change, match", [
    ({"samples_per_s": []}, "non-empty list of positive"),
    ({"samples_per_s": [1.0, float("nan")]}, "positive numbers"),
    ({"way": "horovod"}, "unknown way"),
    ({"kind": None, "policy": None, "way": None}, "unknown way"),
])
def test_check_result_rejects_bad_results(change, match):
    with pytest.raises(ValueError, match=match):
        bench.check_result({**_result(), **change})
    with pytest.raises(ValueError, match="lacks"):
        bench.check_result({"way": "mirrored"})
    with pytest.raises(ValueError, match="is a dict with"):
        bench.check_result([1, 2])


def test_make_report_marks_what_was_not_measured():
    cfg = bench.make_config(replicas=(1, 2), **TINY)
    results = [_result("one_device", 1, (100.0,)), _result("mirrored", 1, (90.0,)),
               _result("one_device", 2, (150.0,)), _result("mirrored", 2, (120.0,))]
    report = bench.make_report(results, cfg, seconds=1.5)
    assert report.get("towers", 1).note == bench.TOWERS_NA
    assert report.get("towers", 2).note == "n/a: not measured"
    assert report.seconds == 1.5 and report.rows()[0]["hardware"] == "1 CPU"
    assert report.hardware_title() == "1 replica: 1 CPU; 2 replicas: 1 CPU split in 2"
    assert "1 CPU split in 2" in report.summary() and "n/a: not measured" in report.summary()
    fig = report.plot()
    assert "1 CPU split in 2" in fig._suptitle.get_text()
    import matplotlib.pyplot as plt

    plt.close(fig)


def _fake_script(tmp_path, body):
    script = tmp_path / "fake_child.py"
    script.write_text(body)
    return script


def test_run_script_collects_json_lines_and_echoes_the_rest(tmp_path, capsys):
    body = ("import json, sys\nn = int(sys.argv[1]); s = json.loads(sys.argv[2])\nprint('hello from', n)\n"
            f"r = {_result()!r}\nr['replicas'] = n; r['samples_per_s'] = [float(s['steps'])]\n"
            "print(json.dumps(r))\n")
    got = bench.run_script(_fake_script(tmp_path, body), 3, bench.make_config(**TINY))
    assert len(got) == 1 and got[0]["replicas"] == 3 and got[0]["samples_per_s"] == [2.0]
    out = capsys.readouterr().out
    assert "hello from 3" in out and "a fresh process runs fake_child.py" in out and "samples/s" in out


def test_run_script_reports_failures_and_timeouts(tmp_path):
    cfg = bench.make_config(**TINY)
    failing = _fake_script(tmp_path, "import sys\nsys.exit('ValueError: broken child')\n")
    with pytest.raises(RuntimeError, match="exit code 1.*broken child"):
        bench.run_script(failing, 2, cfg)
    silent = _fake_script(tmp_path, "print('no results')\n")
    with pytest.raises(RuntimeError, match="0 result"):
        bench.run_script(silent, 2, cfg)
    slow = _fake_script(tmp_path, "import time\ntime.sleep(30)\n")
    with pytest.raises(RuntimeError, match="longer than timeout"):
        bench.run_script(slow, 2, bench.make_config(timeout=1.0, **TINY))
    with pytest.raises(ValueError, match="no script"):
        bench.run_script(tmp_path / "missing.py", 2, cfg)
    with pytest.raises(ValueError, match="replicas"):
        bench.run_script(slow, 0, cfg)


@pytest.mark.slow
def test_run_benchmark_measures_here_and_in_a_fresh_process(replicas, capsys):
    """One call: 1 and 2 replicas with this process's strategies (every way), 3 replicas in a child.

    As in the lesson, the caller makes the strategies once and passes them in. The collective-key policy (lesson
    04, "A trap when you re-run cells"): this is the one multi-replica MirroredStrategy with the default
    (collective) all-reduce in the test process; every other multi-replica strategy in it passes
    cross_device_ops=tf.distribute.ReductionToOneDevice(). A one-replica strategy has nothing to all-reduce.
    """
    import keras
    import tensorflow as tf

    cfg = bench.make_config(replicas=(1, 2, 3), policy="mixed_bfloat16", **TINY)
    strategies = {1: tf.distribute.MirroredStrategy(replicas[:1]), 2: tf.distribute.MirroredStrategy(replicas)}
    report = bench.run_benchmark(cfg, strategies)
    out = capsys.readouterr().out
    assert "3 replica(s): a fresh process runs bench_child.py" in out and out.count("[bench] 2 replica(s) |") == 3
    assert {(m.way, m.replicas) for m in report.measurements if m.available} == \
        {(w, n) for w in bench.WAYS for n in (1, 2, 3)} - {("towers", 1)}
    for n in (1, 2, 3):
        m = report.get("mirrored", n)
        assert m.global_batch == TINY["batch_per_replica"] * n and len(set(m.devices)) == n
        assert m.steps == TINY["steps"] and m.hardware and m.policy == "mixed_bfloat16"   # here and in the child
    assert [m.devices for m in report.measurements if m.way == "mirrored" and m.replicas < 3] == \
        [list(replicas[:1]), list(replicas)]
    assert report.get("one_device", 3).devices_used == 1
    assert keras.mixed_precision.global_policy().name == "float32"        # the kernel's policy is left alone


def test_run_benchmark_refuses_a_strategy_of_another_size(replicas, monkeypatch):
    import tensorflow as tf

    monkeypatch.setattr(bench, "run_script", lambda *a, **k: pytest.fail("nothing may run"))
    one = bench.make_config(replicas=(1,), **TINY)
    with pytest.raises(ValueError, match=r"strategies\[2\] must be a tf.distribute strategy with 2 replica"):
        bench.run_benchmark(one, {2: tf.distribute.MirroredStrategy(replicas[:1])})
    with pytest.raises(ValueError, match="with 1 replica"):
        bench.run_benchmark(one, {1: "a strategy"})


def test_the_script_chooses_its_policy_like_the_course():
    child = subproc.load_script(bench.SCRIPT)
    assert child.policy_for(None, [None]) == "float32" and child.policy_for("mixed_float16", [None]) == "mixed_float16"
    for caps in ([(7, 5), (7, 5)], [(8, 0)], [(6, 0)], [None, None]):
        assert child.policy_for("mixed", caps) == precision.mixed_policy(caps)
