"""tools/chaos.py (``make chaos``) on tiny synthetic jobs of a few lines of Python, no framework: a job that writes
its state atomically passes every figure; one that writes it in place fails after a mid-write kill (resumes and
unloadable files); one that leaves a child running fails "processes left over"; one that overwrites its best file
with a worse epoch fails "best model kept". Also the injected writer's cuts, the load check, the lessons' output
formats the job table relies on, and the tables. The real jobs run in ``make chaos`` (CI: ``KILLS=2``).
"""

import importlib.util
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.one_stack(reason="make chaos runs on the pinned stack only (CI: after the lessons)")


ROOT = Path(__file__).resolve().parent.parent


def load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module          # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


chaos = load("chaos", ROOT / "tools" / "chaos.py")

#: A job of 6 epochs of 0.15 s that prints "epoch k/6 score=s" after writing state.json, keeps the best score in
#: best.json and at its end prints the best file's score. {write} saves a JSON file; {best} decides what is kept.
JOB = '''
import json, os, sys, time
N, SCORES = 6, [0.1, 0.5, 0.9, 0.4, 0.3, 0.2]

def atomic(path, obj):
    with open(path + ".tmp", "w") as f:
        json.dump(obj, f)
    os.replace(path + ".tmp", path)

def in_place(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f)

write = {write}
done = json.load(open("state.json"))["epoch"] if os.path.exists("state.json") else 0
print(f"resumed at {{done}}", flush=True)
{start}
for epoch in range(done + 1, N + 1):
    time.sleep(0.15)
    score = SCORES[epoch - 1]
    best = json.load(open("best.json"))["score"] if os.path.exists("best.json") else -1
    if {best}:
        write("best.json", {{"score": score}})
    write("state.json", {{"epoch": epoch}})
    print(f"epoch {{epoch}}/{{N}} score={{score}}", flush=True)
print(f"best file score={{json.load(open('best.json'))['score']}}", flush=True)
'''
CHILD = ('import subprocess, sys; subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], '
         'start_new_session=True)')


def job(tmp_path: Path, name: str, write="atomic", best="score > best", start="") -> "chaos.Job":
    script = tmp_path / f"{name}.py"
    script.write_text(JOB.format(write=write, best=best, start=start))
    return chaos.Job(name, f"synthetic {name}", ("{python}", str(script)), epochs=6,
                     epoch_done=r"^epoch (?P<epoch>\d+)/\d+ score=(?P<score>[\d.]+)$", resumed_at=r"^resumed at (\d+)",
                     final_score=r"^best file score=([\d.]+)", grace=2.0, timeout=60, guess=(0.1, 0.15, 0.05))


def check_job(tmp_path: Path, the_job, kills=2, seed=0):
    root = tmp_path / "root"
    root.mkdir()
    said = []
    checker = chaos.Check(root, random.Random(seed), say=said.append)
    try:
        report = checker.job(the_job, kills)
        chaos.check_loads([report])
    finally:
        chaos.kill_all(checker.id, prefix=True)
    assert not chaos.tagged(checker.id, prefix=True), "the check left a process of the job"
    return report, said


def figures(report) -> dict:
    return {name: (value, ok) for name, value, ok in report.figures()}


# --------------------------------------------------------------------------- the figures, right and wrong

def test_an_atomic_job_passes_every_figure(tmp_path):
    report, said = check_job(tmp_path, job(tmp_path, "atomic"), kills=4)
    got = figures(report)
    assert all(ok for _, ok in got.values()), (got, said)
    assert got["kills"][0] == "4 of 4 (2 mid-write)"
    assert got["epochs lost per kill"][0] == "0 (every kill)"
    assert sum(k.what.startswith("mid-write: open state.json") or k.what.startswith("mid-write: open best.json")
               for k in report.kills) == 2, [k.what for k in report.kills]


def test_a_job_that_writes_its_state_in_place_fails_after_a_kill_mid_write(tmp_path):
    report, said = check_job(tmp_path, job(tmp_path, "in_place", write="in_place"))
    got = figures(report)
    assert not got["resumes that worked"][1] and not got["unloadable files"][1], (got, said)
    assert any("JSONDecodeError" in u for u in report.unloadable), report.unloadable
    text = chaos.failures(report)
    assert "'resumes that worked' failed" in text and "JSONDecodeError" in text   # the figure and the job's log


def test_a_job_that_leaves_a_child_running_fails_processes_left_over(tmp_path):
    report, said = check_job(tmp_path, job(tmp_path, "child", start=CHILD), kills=1)
    value, ok = figures(report)["processes left over"]
    assert not ok and int(value) >= 1, said
    assert "still alive 2 s after the script ended" in chaos.failures(report)


def test_a_job_that_overwrites_its_best_file_with_a_worse_epoch_fails_best_model_kept(tmp_path):
    report, said = check_job(tmp_path, job(tmp_path, "worse", best="True"), kills=1)
    value, ok = figures(report)["best model kept"]
    assert not ok and value == "0 of 1 trials", (value, said)
    assert "best file 0.2 vs best logged 0.9" in chaos.failures(report)


def test_check_exits_non_zero_naming_the_figure_and_removes_its_folder(tmp_path, capsys):
    before = set(Path(tempfile.gettempdir()).glob("chaos-*"))
    rc = chaos.check([job(tmp_path, "in_place", write="in_place")], kills=2, seed=1)
    out = capsys.readouterr().out
    assert rc == 1 and "chaos: FAILED: in_place (" in out and "'unloadable files' failed" in out
    assert set(Path(tempfile.gettempdir()).glob("chaos-*")) == before


# --------------------------------------------------------------------------- the injected writer

def injected_write(tmp_path: Path, code: str, skip: int = 0) -> subprocess.CompletedProcess:
    """Run ``code`` with the injected sitecustomize armed in ``tmp_path/job``."""
    hook, ctl, folder = tmp_path / "hook", tmp_path / "ctl", tmp_path / "job"
    for d in (hook, ctl, folder):
        d.mkdir(exist_ok=True)
    (hook / "sitecustomize.py").write_text((ROOT / "tools" / "chaos_inject.py").read_text())
    (ctl / "arm").write_text(str(skip))
    env = {**os.environ, "PYTHONPATH": str(hook), "CHAOS_CTL": str(ctl), "CHAOS_FOLDER": str(folder)}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=folder, env=env, timeout=60,
                          capture_output=True, text=True)


def test_a_kill_mid_open_write_leaves_the_old_size_or_a_page_boundary(tmp_path):
    sizes = set()
    for _ in range(8):
        done = injected_write(tmp_path, 'open("log.txt", "w").write("old\\n")\n'
                                        'with open("log.txt", "a") as f: f.write("x" * 10000)', skip=1)
        assert done.returncode == -signal.SIGKILL, done.stderr
        sizes.add((tmp_path / "job" / "log.txt").stat().st_size)
        for hit in (tmp_path / "ctl").glob("hit-*"):
            hit.unlink()
    assert sizes <= {4, 4096, 8192} and len(sizes) > 1, sizes    # the old 4 bytes kept, or whole pages added


def test_the_skip_count_picks_the_write_and_only_one_write_is_killed(tmp_path):
    done = injected_write(tmp_path, 'for i in range(3):\n    open(f"f{i}.json", "w").write("{}")\nprint("alive")',
                          skip=1)
    assert done.returncode == -signal.SIGKILL and "alive" not in done.stdout
    assert (tmp_path / "job" / "f0.json").read_text() == "{}" and (tmp_path / "job" / "f1.json").read_text() == ""
    assert not (tmp_path / "job" / "f2.json").exists()
    events = [json.loads(ln) for ln in (tmp_path / "ctl" / "writes.log").read_text().splitlines()]
    assert [(e["kind"], e["path"]) for e in events] == [("write", "f0.json"), ("write", "f1.json"),
                                                          ("fired", "f1.json")]


def test_writes_outside_the_job_folder_are_left_alone(tmp_path):
    outside = tmp_path / "outside.txt"
    done = injected_write(tmp_path, f'open({str(outside)!r}, "w").write("kept")\nprint("alive")')
    assert done.returncode == 0 and "alive" in done.stdout and outside.read_text() == "kept"


def test_an_in_place_writer_is_cut_at_a_random_byte_and_its_own_open_is_not_counted(tmp_path):
    done = injected_write(tmp_path, """
        import sitecustomize as hook
        def save(model, filepath):   # a writer that opens its path itself, as Keras's save_model does
            with open(filepath, "wb") as f:
                f.write(b"x" * 1000)
        hook._in_place("fake save", save, 1, "filepath")(None, filepath="model.keras")
        """)
    assert done.returncode == -signal.SIGKILL, done.stderr
    events = [json.loads(ln) for ln in (tmp_path / "ctl" / "writes.log").read_text().splitlines()]
    assert [(e["kind"], e["writer"]) for e in events] == [("write", "fake save"), ("fired", "fake save")]
    assert (tmp_path / "job" / "model.keras").stat().st_size == events[1]["cut"] < 1000 == events[1]["size"]


def test_a_writers_module_is_patched_when_it_is_imported(tmp_path):
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "fakewriter.py").write_text("def save(): pass\n")
    done = injected_write(tmp_path, """
        import sitecustomize as hook
        hook.PATCHES["fakewriter"] = lambda module: setattr(module, "patched", True)
        import fakewriter
        print(fakewriter.patched)
        """)
    assert done.returncode == 0 and done.stdout.strip() == "True", done.stderr


@pytest.mark.parametrize("stage", ["shard data", "shard index", "merged index", "state not updated", "state temp"])
def test_a_tensorflow_checkpoint_is_left_as_a_kill_at_each_stage_leaves_it(tmp_path, monkeypatch, stage):
    """Never a truncated 'checkpoint' state file, nor a change to the checkpoint it names (ckpt-1)."""
    inject = load("chaos_inject", ROOT / "tools" / "chaos_inject.py")
    backup = tmp_path / "backup"
    backup.mkdir()
    files = {"checkpoint": b'model_checkpoint_path: "ckpt-1"\n' * 3, "ckpt-1.index": b"i" * 300,
             "ckpt-1.data-00000-of-00001": b"d" * 900, "ckpt-2.index": b"I" * 300,
             "ckpt-2.data-00000-of-00001": b"D" * 900}
    for name, data in files.items():
        (backup / name).write_bytes(data)
    inject._tf_leave(str(backup / "ckpt-2"), stage)
    left = {str(p.relative_to(backup)): p.read_bytes() for p in backup.rglob("*") if p.is_file()}
    for name in ("checkpoint", "ckpt-1.index", "ckpt-1.data-00000-of-00001"):
        assert left[name] == files[name]
    temp = {k: v for k, v in left.items() if k.startswith("ckpt-2_temp/")}
    shard = "ckpt-2_temp/part-00000-of-00001"
    if stage == "shard data":
        assert "ckpt-2.index" not in left and "ckpt-2.data-00000-of-00001" not in left
        (name, data), = temp.items()
        assert name.startswith(f"{shard}.data-00000-of-00001.tempstate") and files["ckpt-2.data-00000-of-00001"
                                                                                   ].startswith(data)
    elif stage == "shard index":
        assert "ckpt-2.index" not in left and temp[f"{shard}.data-00000-of-00001"] == b"D" * 900
        assert any(k.startswith(f"{shard}.index.tempstate") and len(v) < 300 for k, v in temp.items())
    elif stage == "merged index":
        assert left["ckpt-2.data-00000-of-00001"] == b"D" * 900 and len(left["ckpt-2.index"]) < 300
        assert temp == {f"{shard}.index": b"I" * 300}
    elif stage == "state not updated":
        assert left == files
    else:
        (name, data), = ((k, v) for k, v in left.items() if k.startswith("checkpoint.tmp"))
        assert files["checkpoint"].startswith(data)


# --------------------------------------------------------------------------- loading and parsing

def test_files_to_check_and_what_does_not_load(tmp_path):
    (tmp_path / "backup").mkdir()
    (tmp_path / "backup" / "training_metadata.json").write_text("")
    (tmp_path / "good.json").write_text('{"a": 1}')
    (tmp_path / "history.jsonl").write_text('{"epoch": 1}\n{"epo')
    (tmp_path / "state.json.tmp").write_text("")                 # a temporary name: the job never reads it
    (tmp_path / "train.py").write_text("")
    assert chaos.files_to_check(tmp_path) == [("backup/training_metadata.json", "json"), ("good.json", "json"),
                                              ("history.jsonl", "jsonl")]
    results = {rel: error for rel, (error, _) in chaos.load_all([tmp_path])[str(tmp_path)].items()}
    assert results["good.json"] is None and results["backup/training_metadata.json"].startswith("JSONDecodeError")
    assert results["history.jsonl"] == "ValueError: the last line is incomplete (no newline)"


def test_the_lessons_output_formats_the_job_table_relies_on():
    quickstart, lesson07 = (next(j for j in chaos.JOBS if j.name == n) for n in ("quickstart", "07"))
    keras_lines = ["replicas: 2 on (...)", "Epoch 3/6",
                   "22/22 - 4s - 186ms/step - accuracy: 0.8374 - loss: 1.2457 - val_accuracy: 0.8361 - val_loss: 1.07",
                   "Epoch 4/6", "22/22 - 2s - 104ms/step - accuracy: 0.8857 - loss: 0.9031 - val_accuracy: 0.8861 - "
                   "val_loss: 0.8004", "best.keras reloads: val_accuracy 0.886"]
    p = chaos.Progress()
    p.feed(quickstart, [(float(i), ln) for i, ln in enumerate(keras_lines)])
    assert (p.resumed, [(e, s) for e, s, _ in p.done], p.final) == (2, [(3, 0.8361), (4, 0.8861)], 0.886)
    worker = ["[worker-0] replicas ('/job:worker/replica:0/task:0/device:CPU:0',), requested RING, restored ckpt-1: "
              "1 epoch(s) done", "[worker-0] epoch 2/3 loss=2.288468 own share=1.145957 | backup saved",
              "[worker-1] epoch 2/3 loss=2.288468 own share=1.142511 | backup saved"]
    p = chaos.Progress()
    p.feed(lesson07, [(float(i), ln) for i, ln in enumerate(worker)])
    assert (p.resumed, [e for e, _, _ in p.done]) == (1, [2])
    # A kill after best.keras was replaced but before its epoch's line: the score is seen only at the next start,
    # and counts as logged (a fresh start's 0.0000 does not).
    p = chaos.Progress()
    p.feed(quickstart, [(0.0, "start after epoch 0 of 6; best so far: val_accuracy 0.0000"),
                        (1.0, "start after epoch 2 of 6; best so far: val_accuracy 0.9123")])
    assert (p.resumed, p.scores) == (0, [0.9123])


def test_the_tables_render_as_text_and_markdown():
    report = chaos.Report(chaos.JOBS[0], kills_asked=2, seconds=12.3)
    report.kills = [chaos.Kill("random", "at a random moment: the script", 2, 1, worked=True, resumed=2),
                    chaos.Kill("write", "mid-write: keras save_weights backup/latest.weights.h5", 3, 1, worked=False)]
    report.unloadable = ["after kill 2: backup/latest.weights.h5: OSError: truncated file"]
    report.best = [(False, "trial 1: the job never ended")]
    text, md = chaos.job_table(report), chaos.job_table(report, markdown=True)
    for name in ("kills", "resumes that worked", "epochs lost per kill", "unloadable files", "best model kept",
                 "processes left over"):
        assert name in text and f"| {name} |" in md
    assert "2 of 2 (1 mid-write)" in text and "1 of 2" in text and "0 x1, ? x1" in text and "FAILED" in text
    summary = chaos.summary_table([report], markdown=True).splitlines()
    assert summary[0].startswith("| job | kills |") and summary[2].startswith("| quick start | 2 of 2 (1 mid-write) |")


def test_ctrl_c_kills_the_jobs_processes_and_removes_the_temporary_folder(tmp_path):
    """The check interrupted while two slow jobs run at once: their processes die, its folder goes."""
    pids = tmp_path / "pids"
    pids.mkdir()
    slow = ("import os, time\n"
            f"open(os.path.join({str(pids)!r}, str(os.getpid())), 'w').close()\n"
            "time.sleep(120)\n")
    driver = textwrap.dedent(f"""
        import random, sys
        sys.path.insert(0, {str(ROOT / 'tools')!r})
        import chaos
        jobs = [chaos.Job(n, n, ("{{python}}", "-c", {slow!r}), epochs=6, guess=(100.0, 1.0, 1.0)) for n in "ab"]
        sys.exit(chaos.check(jobs, kills=2, seed=0, parallel=2))
    """)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", driver], env={**os.environ, "TMPDIR": str(scratch)},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while len(list(pids.iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(list(pids.iterdir())) == 2, "the jobs did not start"
    proc.send_signal(signal.SIGINT)
    out = proc.communicate(timeout=60)[0]
    assert proc.returncode != 0 and "KeyboardInterrupt" in out, out
    alive = [p.name for p in pids.iterdir() if Path(f"/proc/{p.name}").exists()
             and "Z" not in Path(f"/proc/{p.name}/stat").read_text().rpartition(")")[2].split()[:1]]
    assert not alive and not list(scratch.iterdir()), (alive, list(scratch.iterdir()))
