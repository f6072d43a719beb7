"""helpers.cluster (the local multi-worker launcher).

The process tests use tiny Python scripts instead of TensorFlow workers: what is
tested is the launcher (TF_CONFIG per worker, logs, fail-fast, cleanup), and
lesson 07 runs the real TensorFlow workers end to end.
"""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from helpers import cluster, subproc
from helpers.cluster import ClusterSpecError, ClusterTimeoutError, LocalCluster, PortBusyError, WorkerFailedError
from helpers.subproc import pid_alive as alive


def _all_gone(pids, within: float = 5.0) -> bool:
    """True once none of ``pids`` runs (a SIGKILL is delivered asynchronously to non-children)."""
    deadline = time.time() + within
    while any(alive(p) for p in pids):
        if time.time() > deadline:
            return False
        time.sleep(0.05)
    return True


def _script(tmp_path, name, body):
    p = tmp_path / name
    p.write_text(textwrap.dedent(body))
    return str(p)


ECHO = """
    import json, os
    cfg = json.loads(os.environ["TF_CONFIG"])
    print("task", cfg["task"]["type"], cfg["task"]["index"], "of", len(cfg["cluster"]["worker"]))
    print("cuda", os.environ["CUDA_VISIBLE_DEVICES"], "backend", os.environ.get("KERAS_BACKEND"))
    print("threads", os.environ.get("TF_NUM_INTRAOP_THREADS"), os.environ.get("TF_NUM_INTEROP_THREADS"))
    print("colors", os.environ.get("PYTHON_COLORS"))
"""

# worker 0 fails at once; worker 1 starts a grandchild and then hangs (like a peer stuck in a collective)
FAIL_AND_HANG = """
    import json, os, subprocess, sys, time
    index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
    if index == 0:
        time.sleep(0.5)
        raise ValueError("boom: worker 0 failed\\non two lines")
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    print("grandchild", child.pid, flush=True)
    time.sleep(120)
"""

SLEEPER = """
    import os, sys, time
    print("ready", os.getpid(), flush=True)
    time.sleep(120)
"""


# ----------------------------------------------------------------------------- specs

def test_validate_good_spec_is_normalised():
    spec = cluster.validate_cluster_spec({"chief": ("localhost:2000",), "worker": ["127.0.0.1:2001", "h2:2002"]})
    assert spec == {"chief": ["localhost:2000"], "worker": ["127.0.0.1:2001", "h2:2002"]}


@pytest.mark.parametrize("spec, words", [
    (["127.0.0.1:1"], "non-empty dict"),
    ({}, "non-empty dict"),
    ({"workers": ["127.0.0.1:1"]}, "unknown job name 'workers'"),
    ({"worker": "127.0.0.1:1"}, "non-empty list"),
    ({"worker": []}, "non-empty list"),
    ({"worker": ["127.0.0.1"]}, r"worker\[0\]: expected 'host:port'"),
    ({"worker": ["127.0.0.1:http"]}, "port must be a number"),
    ({"worker": ["127.0.0.1:0"]}, "out of range"),
    ({"worker": ["127.0.0.1:70000"]}, "out of range"),
    ({"worker": [":80"]}, "bad host"),
    ({"worker": ["127.0.0.1:5000", "localhost:5000"]}, r"worker\[1\] 'localhost:5000' duplicates worker\[0\]"),
    ({"chief": ["a:1", "b:2"], "worker": ["c:3"]}, "exactly one task"),
    ({"ps": ["a:1"]}, "needs a 'worker'"),
])
def test_bad_specs_get_clear_errors(spec, words):
    with pytest.raises(ClusterSpecError, match=words):
        cluster.validate_cluster_spec(spec)
    assert issubclass(ClusterSpecError, ValueError)


def test_the_launchers_two_indexed_messages(capsys):
    """TROUBLESHOOTING.md indexes these two messages ("The course's launcher"): printed here, as a learner sees them."""
    with pytest.raises(ClusterSpecError) as same_port:
        cluster.validate_cluster_spec({"worker": ["127.0.0.1:5000", "localhost:5000"]})
    with socket.socket() as squatter, pytest.raises(PortBusyError) as taken:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen(1)
        cluster.check_ports_free({"worker": [f"127.0.0.1:{squatter.getsockname()[1]}", "127.0.0.1:5001"]})
    for caught in (same_port, taken):
        print(f"{caught.type.__name__}: {caught.value}")
    out = capsys.readouterr().out
    assert "ClusterSpecError: worker[1] 'localhost:5000' duplicates worker[0]: every task needs its own port" in out
    assert "PortBusyError: port(s) already in use on this machine: worker[0] 127.0.0.1:" in out
    print(out)  # again, after the capture was read: the error index collects this test's output


def test_tf_config_round_trip_and_errors():
    spec = {"worker": ["127.0.0.1:5000", "127.0.0.1:5001"]}
    text = cluster.tf_config(spec, "worker", 1)
    assert json.loads(text) == {"cluster": spec, "task": {"type": "worker", "index": 1}}
    assert cluster.parse_tf_config(text) == (spec, "worker", 1)
    with pytest.raises(ClusterSpecError, match="out of range"):
        cluster.tf_config(spec, "worker", 2)
    with pytest.raises(ClusterSpecError, match="not a job"):
        cluster.tf_config(spec, "chief", 0)
    with pytest.raises(ClusterSpecError, match="not valid JSON"):
        cluster.parse_tf_config("{worker: 1}")
    with pytest.raises(ClusterSpecError, match="'cluster' and 'task'"):
        cluster.parse_tf_config('{"cluster": {"worker": ["a:1"]}}')


def test_free_ports_are_distinct_and_free():
    ports = cluster.free_ports(3)
    assert len(set(ports)) == 3 and all(cluster.port_is_free(p) for p in ports)
    spec = cluster.local_cluster_spec(2)
    assert len(spec["worker"]) == 2 and all(a.startswith("127.0.0.1:") for a in spec["worker"])
    with pytest.raises(ValueError):
        cluster.free_ports(0)
    with pytest.raises(ClusterSpecError, match="2 port"):
        cluster.local_cluster_spec(3, ports=[1234, 1235])


def test_busy_port_is_reported_before_anything_starts(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        assert not cluster.port_is_free(port)
        with pytest.raises(PortBusyError, match=rf"worker\[1\] 127.0.0.1:{port}.*already in use|in use.*{port}"):
            cluster.check_ports_free({"worker": [f"127.0.0.1:{cluster.free_ports(1)[0]}", f"127.0.0.1:{port}"]})
        c = LocalCluster(_script(tmp_path, "w.py", SLEEPER), ports=[cluster.free_ports(1)[0], port])
        with pytest.raises(PortBusyError, match="free_ports"):
            c.start()
        assert c.workers == []


def test_cluster_refuses_bad_commands(tmp_path):
    with pytest.raises(ValueError, match="not found"):
        LocalCluster(str(tmp_path / "missing.py"))
    with pytest.raises(ValueError, match="list of strings"):
        LocalCluster([])
    with pytest.raises(ValueError, match="module name"):
        LocalCluster(["-m"])


def test_keras_distribution_variables_only_when_asked():
    """keras.distribution.initialize() with no arguments reads these three (lesson 13's worker)."""
    plain, keras_vars = LocalCluster(["-m", "json.tool"], 2), LocalCluster(["-m", "json.tool"], 2, keras_distribution=True)
    assert not any(k.startswith("KERAS_DISTRIBUTION_") for k in plain.worker_env(1))
    env = keras_vars.worker_env(1)
    assert env["KERAS_DISTRIBUTION_JOB_ADDRESSES"] == ",".join(keras_vars.spec["worker"])
    assert (env["KERAS_DISTRIBUTION_NUM_PROCESSES"], env["KERAS_DISTRIBUTION_PROCESS_ID"]) == ("2", "1")
    assert json.loads(env["TF_CONFIG"])["task"]["index"] == 1
    with pytest.raises(ValueError, match="True or False"):
        LocalCluster(["-m", "json.tool"], 2, keras_distribution="yes")


def test_gpu_assignment():
    assert cluster.gpu_assignment(2, 0, []) == ["-1", "-1"]
    assert cluster.gpu_assignment(2, 1, ["0", "1", "2"]) == ["0", "1"]
    assert cluster.gpu_assignment(2, 2, ["0", "1", "2", "3"]) == ["0,1", "2,3"]
    with pytest.raises(ValueError, match="need 2 GPUs"):
        cluster.gpu_assignment(2, 1, ["0"])
    with pytest.raises(ValueError, match=">= 0"):
        cluster.gpu_assignment(2, -1, [])


# ----------------------------------------------------------------------------- logs

# What a worker's log looks like when Keras 3 fit fails under MWMS.  Short shape: the message on a
# few lines (what the launcher summarised before).  Long shape (Keras 3.13.2/TF 2.20 and Keras 3.15.1/TF 2.21
# alike): the per-replica tensors printed over hundreds of lines, blank lines and "..." included, framed
# by TF 2.20's timestamped C++ log lines and Python 3.13's ~~~^^^ markers.
SHORT_LOG = """\
I0000 00:00:1795962645.553183    5863 cuda_platform.cc:52] noise
[worker 0] started
Traceback (most recent call last):
  File "x.py", line 1, in <module>
ValueError: Attempt to convert a value (PerReplica:{
  0: <tf.Tensor ...>
  1: more
}) with an unsupported type (PerReplica) to a Tensor.
"""

_TENSOR = "\n".join(["array([[[[0.    ],", "         [0.4375],", "         ...,", "         [0.    ]],", "",
                      "        ...,", ""] * 40 + ["         [0.    ]]]], shape=(32, 8, 8, 1), dtype=float32)>"])
LONG_LOG = f"""\
2026-12-01 04:46:00.733949: E external/local_xla/xla/stream_executor/cuda/cuda_platform.cc:51] failed call to cuInit
WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
[worker 0] route fit: Keras 3 model.fit under MultiWorkerMirroredStrategy
Traceback (most recent call last):
  File "<frozen runpy>", line 198, in _run_module_as_main
  File "/tmp/mwms_train.py", line 216, in <module>
    sys.exit(main())
             ~~~~^^
  File "/site-packages/tensorflow/python/framework/constant_op.py", line 108, in convert_to_eager_tensor
    return ops.EagerTensor(value, ctx.device_name, dtype)
           ~~~~~~~~~~~~~~~^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
ValueError: Attempt to convert a value (PerReplica:{{
  0: <tf.Tensor: shape=(32, 8, 8, 1), dtype=float32, numpy=
{_TENSOR}
}}) with an unsupported type (<class 'tensorflow.python.distribute.values.PerReplica'>) to a Tensor.
I0000 00:00:1795962645.553183    5863 grpc_server_lib.cc:466] shutting down
"""


def test_final_exception_and_summary_of_both_log_shapes():
    assert "I0000" not in subproc.strip_noise(SHORT_LOG) and "[worker 0] started" in subproc.strip_noise(SHORT_LOG)
    assert "2026-12-01" not in subproc.strip_noise(LONG_LOG)  # TF 2.20's log format is noise too
    assert subproc.error_summary(SHORT_LOG) == ("ValueError: Attempt to convert a value (PerReplica:{ ... }) "
                                                "with an unsupported type (PerReplica) to a Tensor.")
    full = subproc.final_exception(LONG_LOG)
    assert full.startswith("ValueError: Attempt to convert a value (PerReplica:{\n  0: <tf.Tensor")
    assert full.endswith("to a Tensor.") and len(full.splitlines()) > 250 and "\n\n" in full
    summary = subproc.error_summary(LONG_LOG)
    assert summary == ("ValueError: Attempt to convert a value (PerReplica:{ ... }) with an unsupported type "
                       "(<class 'tensorflow.python.distribute.values.PerReplica'>) to a Tensor.")


def test_colored_tracebacks_are_read_too():
    """Python 3.13 colours the exception line when FORCE_COLOR is set (ipykernel sets it for its children)."""
    for log in (SHORT_LOG, LONG_LOG):
        colored = (log.replace("Traceback (most recent", "\x1b[1;35mTraceback\x1b[0m (most recent")
                   .replace("ValueError: Attempt", "\x1b[1;35mValueError\x1b[0m: \x1b[35mAttempt")
                   .replace("to a Tensor.\n", "to a Tensor.\x1b[0m\n"))
        assert "\x1b[" in colored
        assert subproc.final_exception(colored) == subproc.final_exception(log) != ""
        assert subproc.error_summary(colored).startswith("ValueError: Attempt to convert a value (PerReplica:{")
        assert "\x1b" not in subproc.strip_noise(colored)


def test_final_exception_edge_cases():
    assert subproc.final_exception("all good\n") == subproc.error_summary("all good\n") == ""
    assert subproc.error_summary("KeyError: 'x'") == "KeyError: 'x'"  # no traceback: the last error-like line
    chained = ("Traceback (most recent call last):\n  File 'a'\nKeyError: 'k'\n\n"
               "During handling of the above exception, another exception occurred:\n\n"
               "Traceback (most recent call last):\n  File 'b'\nRuntimeError: second\n"
               "[worker 1] a line printed later\n")
    assert subproc.final_exception(chained) == "RuntimeError: second"  # the last one, up to the next [worker N]
    long_line = "ValueError: " + "x" * 1000
    assert len(subproc.error_summary(long_line, max_chars=100)) <= 105
    with pytest.raises(ValueError, match="max_chars"):
        subproc.error_summary(long_line, max_chars=3)


# ----------------------------------------------------------------------------- processes

def test_run_gives_each_worker_its_tf_config(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KERAS_BACKEND", "jax")  # a notebook's backend must not leak into workers
    monkeypatch.setenv("FORCE_COLOR", "1")      # what ipykernel sets; workers must still log plain text
    result = cluster.run(_script(tmp_path, "echo.py", ECHO), 3, log_dir=tmp_path / "logs", timeout=60)
    assert result.ok and result.returncodes == [0, 0, 0]
    for i, w in enumerate(result.workers):
        assert f"task worker {i} of 3" in w.log
        assert "cuda -1 backend None" in w.log and "colors 0" in w.log
        share = max(1, cluster.usable_cores() // 3)  # the cores shared among the 3 workers
        assert f"threads {share} {share}" in w.log
        assert w.log_path == tmp_path / "logs" / f"worker-{i}.log"
    out = capsys.readouterr().out
    assert "3 worker(s) on 127.0.0.1:" in out and "worker 2: exit 0" in out


def test_cpu_threads_are_shared_and_module_commands_run(tmp_path, monkeypatch):
    monkeypatch.setattr(cluster, "usable_cores", lambda: 8)
    assert LocalCluster(["-m", "json.tool"], 2).cpu_threads == 4
    assert LocalCluster(["-m", "json.tool"], 16).cpu_threads == 1
    (tmp_path / "echomod.py").write_text(textwrap.dedent(ECHO))
    result = cluster.run(["-m", "echomod"], 2, env={"PYTHONPATH": str(tmp_path)}, timeout=60, echo=False)
    assert all("threads 4 4" in w.log for w in result.workers)


def test_usable_cores_follows_the_affinity_mask():
    assert cluster.usable_cores() == len(os.sched_getaffinity(0)) >= 1


def test_failing_worker_stops_the_others_and_leaves_no_orphans(tmp_path, capsys):
    t0 = time.time()
    with pytest.raises(WorkerFailedError, match="worker 0: exit 1 - ValueError: boom") as info:
        cluster.run(_script(tmp_path, "fail.py", FAIL_AND_HANG), 2, grace=0.5, timeout=60)
    assert time.time() - t0 < 30  # fail fast, not the 120 s the other worker would sleep
    result = info.value.result
    assert result.returncodes[0] == 1 and result.returncodes[1] == -signal.SIGKILL
    assert result.workers[1].stopped
    assert "stopped by the launcher" in result.workers[1].describe()
    grandchild = int(result.workers[1].log.split("grandchild")[1].split()[0])
    assert _all_gone([w.pid for w in result.workers] + [grandchild])
    assert "boom" in capsys.readouterr().out  # the logs were shown


# Both workers raise an error whose message spans 300 lines (blank lines included), worker 1 a bit later.
LONG_FAIL = """
    import json, os, time
    index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
    time.sleep(0.3 * index)
    rows = "\\n".join(f"  {i}: [0.5, 0.25]" if i % 7 else "" for i in range(300))
    raise ValueError(f"Attempt to convert a value (PerReplica:{{\\n{rows}\\n}}) of worker {index} to a Tensor.")
"""


def test_worker_failed_error_quotes_every_workers_long_error(tmp_path, capsys):
    with pytest.raises(WorkerFailedError, match=r"2 of 2 worker\(s\) failed") as info:
        cluster.run(_script(tmp_path, "long.py", LONG_FAIL), 2, grace=10, timeout=60, echo=False)
    message = str(info.value)
    for i in range(2):
        assert re.search(rf"worker {i}: exit 1 - ValueError: Attempt to convert a value \(PerReplica:\{{ \.\.\. "
                         rf"\}}\) of worker {i} to a Tensor\.", message), message
    assert len(message.splitlines()) == 1  # a summary; the full text is in .errors
    assert set(info.value.errors) == {"worker 0", "worker 1"}
    assert all(len(e.splitlines()) == 302 for e in info.value.errors.values())
    assert info.value.errors["worker 1"].endswith("of worker 1 to a Tensor.")


def test_exception_in_with_block_kills_workers(tmp_path):
    with pytest.raises(RuntimeError, match="cell failed"):
        with LocalCluster(_script(tmp_path, "s.py", SLEEPER), 2) as c:
            c.wait_for("ready", worker=1, timeout=30)
            pids = c.pids
            assert all(alive(p) for p in pids)
            raise RuntimeError("cell failed")
    assert _all_gone(pids)


def test_timeout_kills_everything(tmp_path):
    c = LocalCluster(_script(tmp_path, "s.py", SLEEPER), 2).start()
    with pytest.raises(ClusterTimeoutError, match="all killed"):
        c.wait(timeout=1.0)
    assert _all_gone(c.pids)


def test_wait_for_kill_and_result(tmp_path):
    with LocalCluster(_script(tmp_path, "s.py", SLEEPER), 2) as c:
        line = c.wait_for(r"ready \d+", timeout=30)
        assert line == f"ready {c.pids[0]}"
        assert c.kill(1) == [c.pids[1]]
        result = c.wait(timeout=30, grace=0.2)
    assert result.returncodes == [-signal.SIGKILL, -signal.SIGKILL]
    assert "killed by SIGKILL" in result.workers[1].describe()
    assert not result.workers[1].stopped and result.workers[0].stopped
    with pytest.raises(WorkerFailedError, match="2 of 2"):
        result.raise_for_failure()
    with pytest.raises(ValueError, match="worker must be a worker index from 0 to 1, got 5"):
        c.kill(5)


def test_wait_for_reports_a_worker_that_exits_first(tmp_path):
    with LocalCluster(["-c", "print('bye')"], 1) as c:
        with pytest.raises(WorkerFailedError, match="exit 0 before printing a line matching 'never'"):
            c.wait_for("never", timeout=30)
    with LocalCluster(_script(tmp_path, "s.py", SLEEPER), 1) as c:
        with pytest.raises(ClusterTimeoutError, match="within 0.5 s"):
            c.wait_for("never", timeout=0.5)
        assert c.workers[0].returncode == -signal.SIGKILL


def test_cluster_runs_once_and_needs_start(tmp_path):
    c = LocalCluster(["-c", "pass"], 1)
    with pytest.raises(RuntimeError, match="start the cluster first"):
        c.wait()
    c.start()
    c.wait(timeout=30)
    with pytest.raises(RuntimeError, match="already started"):
        c.start()
    with pytest.raises(ValueError, match="timeout"):
        c.wait(timeout=0)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")
def test_workers_die_with_a_killed_launcher(tmp_path):
    """A kernel that is killed outright (no cleanup code runs) must not leave workers behind."""
    pidfile = tmp_path / "pids.json"
    parent = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import json, time
        from helpers.cluster import LocalCluster
        c = LocalCluster({_script(tmp_path, "s.py", SLEEPER)!r}, 2).start()
        c.wait_for("ready", worker=1, timeout=30)
        open({str(pidfile)!r}, "w").write(json.dumps(c.pids))
        time.sleep(120)
        """)], cwd=str(Path(cluster.__file__).parent.parent))
    try:
        deadline = time.time() + 60
        while not pidfile.exists() or not pidfile.read_text():
            assert time.time() < deadline and parent.poll() is None
            time.sleep(0.1)
        pids = json.loads(pidfile.read_text())
        assert all(alive(p) for p in pids)
        parent.kill()
        parent.wait()
        deadline = time.time() + 10
        while any(alive(p) for p in pids) and time.time() < deadline:
            time.sleep(0.1)
        assert _all_gone(pids)
    finally:
        parent.kill()
        for p in json.loads(pidfile.read_text() or "[]") if pidfile.exists() else []:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass


# ----------------------------------------------------------------------------- worker scripts

def test_pid_alive():
    assert subproc.pid_alive(os.getpid())
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    assert not subproc.pid_alive(p.pid)


def test_ctrl_c_kills_workers(tmp_path):
    """Ctrl-C in the process that called cluster.run: KeyboardInterrupt, and no worker left."""
    pidfile = tmp_path / "pids"
    script = _script(tmp_path, "s.py", f"""
        import os, time
        with open({str(pidfile)!r}, "a") as f:
            f.write(f"{{os.getpid()}}\\n")
        print("ready", flush=True)
        time.sleep(120)
    """)
    # Ctrl-C as in a terminal (handled, not blocked), whatever this test process's signal state is: a child inherits
    # the ignored signals and the blocked ones (twice, in a full CI session, the child outlived the Ctrl-C by 30 s,
    # as one that ignores it does).
    # SIGUSR1 makes it print where it is: if it outlives the Ctrl-C, the failure says where it was.
    code = ("import faulthandler, signal; faulthandler.register(signal.SIGUSR1); "
            "signal.signal(signal.SIGINT, signal.default_int_handler); "
            "signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT]); "
            f"from helpers import cluster; cluster.run([{script!r}], 2)")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=str(Path(cluster.__file__).parent.parent),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 60
        while len(pidfile.read_text().split() if pidfile.exists() else []) < 2:
            assert time.time() < deadline and proc.poll() is None
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            status = Path(f"/proc/{proc.pid}/status").read_text()
            proc.send_signal(signal.SIGUSR1)
            time.sleep(2)
            proc.kill()
            out, err = proc.communicate(timeout=30)
            pytest.fail("still running 30 s after Ctrl-C:\n" + "\n".join(
                ln for ln in status.splitlines() if ln.startswith(("State", "Sig", "Shd"))) + "\n" + err[-3000:])
    finally:
        proc.kill()
    assert proc.returncode != 0 and "KeyboardInterrupt" in err
    assert _all_gone([int(p) for p in pidfile.read_text().split()])


# ----------------------------------------------------------------------------- nothing left behind


def test_run_leaves_no_temporary_folder_and_keeps_the_logs_readable(leftovers, tmp_path, capsys):
    result = cluster.run(_script(tmp_path, "echo.py", ECHO), 2, timeout=60)
    assert result.ok and all("task worker" in w.log for w in result.workers)    # read after the folder went
    assert not result.log_dir.exists() and "(log: " not in capsys.readouterr().out
    with pytest.raises(WorkerFailedError):                                      # a failure
        cluster.run(_script(tmp_path, "fail.py", FAIL_AND_HANG), 2, grace=0.5, timeout=60, echo=False)
    with pytest.raises(ClusterTimeoutError) as info:                             # a timeout
        cluster.run(_script(tmp_path, "s.py", SLEEPER), 2, timeout=1.0, echo=False)
    assert "Logs:" not in str(info.value)
    assert leftovers.folders() == [] and leftovers.processes() == []
    kept = cluster.run(_script(tmp_path, "echo2.py", ECHO), 1, timeout=60, log_dir=tmp_path / "mine", echo=False)
    assert (tmp_path / "mine" / "worker-0.log").exists() and kept.ok            # a folder of the caller's stays


def test_a_busy_port_leaves_no_temporary_folder(leftovers, tmp_path):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        with pytest.raises(PortBusyError):
            cluster.run(["-c", "pass"], 1, ports=[s.getsockname()[1]], timeout=10)
    assert leftovers.folders() == []
