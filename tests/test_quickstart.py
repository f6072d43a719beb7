"""The "2 GPUs in 5 minutes" quick start: one script, three copies that must not drift, and it runs alone.

The script lives in quickstart/train_2gpus.py. Lesson 00 writes it with one %%writefile cell and the README
shows it under the heading "## 2 GPUs in 5 minutes": all three must be the same text. It must run in a fresh
process, from an empty folder, where the course's helpers cannot be imported, as a learner who pasted it runs it.
"""

import ast
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import killpoints
import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "quickstart" / "train_2gpus.py"
NOTEBOOK = ROOT / "notebooks" / "00_start_here.ipynb"
README = ROOT / "README.md"
HEADING = "## 2 GPUs in 5 minutes"
MAX_LINES = 60


def _script() -> str:
    return SCRIPT.read_text(encoding="utf-8")


def _writefile_cell() -> tuple[str, str]:
    """(magic line, body) of lesson 00's %%writefile cell for the script."""
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    found = [("".join(c["source"])) for c in cells
             if c["cell_type"] == "code" and "".join(c["source"]).startswith("%%writefile")
             and "train_2gpus.py" in "".join(c["source"]).splitlines()[0]]
    assert len(found) == 1, f"lesson 00 must write train_2gpus.py in exactly one %%writefile cell, found {len(found)}"
    magic, _, body = found[0].partition("\n")
    return magic, body


def _readme_block() -> str:
    text = README.read_text(encoding="utf-8")
    assert HEADING in text.splitlines(), (
        f"README.md has no '{HEADING}' section: paste the quick-start section (heading, two sentences, the "
        "```python block = quickstart/train_2gpus.py, how to run it) into README.md")
    section = text.split(HEADING + "\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1, f"the README's '{HEADING}' section needs exactly one ```python block, has {len(blocks)}"
    return blocks[0]


def test_script_is_short_and_needs_no_helpers():
    text = _script()
    assert len(text.splitlines()) <= MAX_LINES, f"{len(text.splitlines())} lines (at most {MAX_LINES})"
    tree = ast.parse(text)
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert imported == {"os", "keras", "tensorflow", "sklearn"}, imported
    for call in ("tf.config.list_physical_devices(\"GPU\")", "tf.config.set_logical_device_configuration(",
                 "tf.distribute.MirroredStrategy()", "* strategy.num_replicas_in_sync", "drop_remainder=True",
                 "strategy.extended.worker_devices", "learning_rate = ", "with strategy.scope():",
                 "model.compile(", "model.fit(", "load_digits",
                 'print(f"replicas: {strategy.num_replicas_in_sync} on',
                 "assert strategy.num_replicas_in_sync == max(len(gpus), 2)",
                 # issue 39: its own marked folder, atomic saves, one resume state, the epoch's line after the saves
                 'RUN, MARK = "train_2gpus.run", "train_2gpus.run/.made-by-train_2gpus"', "os.replace(",
                 "model.optimizer.build(model.trainable_variables)", 'save(model.save, "best.keras")',
                 'save(model.save_weights, "state.weights.h5")', "initial_epoch=", "verbose=2"):
        assert call in text, f"the quick start must write {call}"


def test_lesson_00_writes_the_same_script():
    magic, body = _writefile_cell()
    assert magic == "%%writefile {scratch}/train_2gpus.py", magic
    assert body + "\n" == _script(), "lesson 00's %%writefile cell and quickstart/train_2gpus.py differ"


def test_readme_shows_the_same_script():
    assert _readme_block() == _script(), f"README.md's '{HEADING}' block and quickstart/train_2gpus.py differ"


def test_readme_states_the_guarantee_next_to_the_script():
    section = README.read_text(encoding="utf-8").split(HEADING + "\n", 1)[1].split("\n## ", 1)[0]
    assert "**A kill at any moment, during a write too, loses at most the epoch in progress:**" in section
    assert "never deletes or overwrites a file it did not create" in section


def test_readme_shows_make_chaos_table_with_every_figure_perfect():
    """Next to the guarantee: `make chaos`'s summary (tools/chaos.py --markdown), 20 kills a job or more, half of
    them mid-write, for the four jobs, and nothing but perfect figures (a pasted failure fails here)."""
    import chaos  # tools/chaos.py

    section = README.read_text(encoding="utf-8").split(HEADING + "\n", 1)[1].split("\n## ", 1)[0]
    rows = [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in section.splitlines()
            if ln.startswith("| ") and "---" not in ln]
    header = rows[0]
    assert header[:7] == ["job", "kills", "resumes that worked", "epochs lost per kill", "unloadable files",
                          "best model kept", "processes left over"], header
    titles = {job.title.split(",")[0] for job in chaos.JOBS}
    assert {row[0] for row in rows[1:]} == titles and len(rows) == 1 + len(titles), rows
    for job, kills, worked, lost, unloadable, best, leftover, *_ in rows[1:]:
        done, asked, writes = (int(n) for n in re.fullmatch(r"(\d+) of (\d+) \((\d+) mid-write\)", kills).groups())
        assert done == asked >= 20 and writes >= asked // 2, (job, kills)
        assert worked == f"{done} of {done}" and lost == "0 (every kill)", (job, worked, lost)
        assert unloadable == "0" and leftover == "0" and "FAILED" not in best, (job, unloadable, best, leftover)
        if best != "n/a (no best file)":
            kept, trials = (int(n) for n in re.fullmatch(r"(\d+) of (\d+) trials", best).groups())
            assert kept == trials > 0, (job, best)


RUN = "train_2gpus.run"
OWN = [".made-by-train_2gpus", "best.keras", "state.weights.h5"]    # all the job leaves in its folder
NO_HELPERS = ["-c", "import runpy, sys; sys.modules['helpers'] = None; runpy.run_path('train_2gpus.py', "
                    "run_name='__main__')"]                           # `import helpers` fails in this process


def _run(folder: Path, argv: list[str], timeout: float = 240) -> subprocess.CompletedProcess:
    """One run of the script in ``folder``: ``python <argv>`` (NO_HELPERS, or a killpoints command)."""
    argv = argv if argv[0] == sys.executable else [sys.executable, *argv]
    return subprocess.run(argv, cwd=folder, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})


def _start(log: str) -> tuple[int, float]:
    """The run's start line: (epochs done before it, best.keras's val_accuracy so far)."""
    found = re.findall(r"^start after epoch (\d+) of 6; best so far: val_accuracy ([0-9.]+)$", log, re.M)
    assert len(found) == 1, f"no start line:\n{log}"
    return int(found[0][0]), float(found[0][1])


def _reloads(log: str) -> float:
    found = re.findall(r"^best.keras reloads: val_accuracy ([0-9.]+)$", log, re.M)
    assert len(found) == 1, f"no 'best.keras reloads' line:\n{log}"
    return float(found[0])


def _learners_files(folder: Path) -> dict[str, bytes]:
    """What a learner may have where they run the script: the names the old script used, and one of the new."""
    files = {"backup/notes.txt": b"my notes\n", "best.keras": b"my own model, not a zip\n",
             "state.weights.h5": b"mine too\n", "backup/latest.weights.h5": b"an old backup\n"}
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    return files


@pytest.mark.slow
@pytest.mark.one_stack(reason="lesson 00 runs these same bytes on every stack (nbval); this run adds the learner's "
                       "files, the helpers kept out and a run after the end, which no stack changes")
def test_runs_alone_keeps_your_files_and_says_when_done(tmp_path):
    """From a folder that holds a learner's files and an empty train_2gpus.run/ (a kill between the folder and its
    mark): it trains on 2+ replicas, touches none of the learner's files, and a run after the end trains nothing,
    says so, and keeps best.keras."""
    (tmp_path / "train_2gpus.py").write_text(_script(), encoding="utf-8")
    mine = _learners_files(tmp_path)
    (tmp_path / RUN).mkdir()
    first = _run(tmp_path, NO_HELPERS)
    assert first.returncode == 0, first.stderr[-3000:]
    lines = first.stdout.splitlines()
    replicas = [ln for ln in lines if ln.startswith("replicas: ")]
    assert len(replicas) == 1 and int(replicas[0].split()[1]) >= 2, first.stdout
    assert "device:" in replicas[0], "the script prints the replicas' devices"
    logged = killpoints.epochs(first.stdout)
    assert _start(first.stdout) == (0, 0.0) and [k for k, _ in logged] == [1, 2, 3, 4, 5, 6], first.stdout
    assert abs(_reloads(first.stdout) - max(v for _, v in logged)) < 0.002, first.stdout
    assert {name: (tmp_path / name).read_bytes() for name in mine} == mine, "a learner's file changed"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["backup", "best.keras", "state.weights.h5",
                                                           "train_2gpus.py", RUN]
    assert sorted(p.name for p in (tmp_path / RUN).iterdir()) == OWN
    best = (tmp_path / RUN / "best.keras").read_bytes()

    again = _run(tmp_path, NO_HELPERS)                               # after the end: nothing to train
    assert again.returncode == 0, again.stderr[-3000:]
    assert _start(again.stdout)[0] == 6 and not killpoints.epochs(again.stdout), again.stdout
    assert (tmp_path / RUN / "best.keras").read_bytes() == best and _reloads(again.stdout) == _reloads(first.stdout)
    assert {name: (tmp_path / name).read_bytes() for name in mine} == mine


@pytest.mark.slow
def test_a_folder_it_did_not_make_stops_it(tmp_path):
    """A train_2gpus.run/ without the script's mark (the learner's, or another program's) is refused, untouched."""
    (tmp_path / "train_2gpus.py").write_text(_script(), encoding="utf-8")
    (tmp_path / RUN).mkdir()
    (tmp_path / RUN / "best.keras").write_bytes(b"someone else's\n")
    run = _run(tmp_path, NO_HELPERS)
    assert run.returncode == 1, (run.returncode, run.stderr[-3000:])
    assert f"{tmp_path / RUN} was not made by this script: move or rename it, then run again" in run.stderr
    assert [p.name for p in (tmp_path / RUN).iterdir()] == ["best.keras"]
    assert (tmp_path / RUN / "best.keras").read_bytes() == b"someone else's\n"


def _untrain(weights_h5: Path) -> None:
    """Overwrite the model's weights in the state file with fresh small random ones (the optimizer's state, its
    step counter included, stays): the resumed epoch then starts almost from scratch and ends worse."""
    import h5py
    import numpy as np

    rng = np.random.default_rng(0)
    with h5py.File(weights_h5, "r+") as f:
        for layer in f["layers"].values():
            for var in layer["vars"].values():
                var[...] = rng.normal(0, 0.05, var.shape) if var.ndim == 2 else 0.0


@pytest.mark.slow
def test_kills_during_writes_lose_at_most_the_epoch_in_progress(tmp_path):
    """Four runs in one folder, three of them killed where it hurts, the last one finishing:

    1. killed halfway through writing best.keras at its 2nd save (epoch 2): the job writes a temporary file, so
       best.keras (epoch 1) stays whole, and the next run goes on after epoch 1, over its own leftover;
    2. killed halfway through writing the state at its 2nd save (epoch 3), after epoch 3's better model was renamed
       into best.keras: the next run goes on after epoch 2, and its start line gives best.keras's score (higher
       than any printed: an epoch's line comes after its saves);
    3. killed right after the state of epoch 5 was renamed into place, before its line: the next run goes on after
       epoch 5 (not printed, not lost either);
    4. resumed from that state with its weights made worse: epoch 6 scores lower, and best.keras keeps the best.

    After every kill: the next run starts after the last epoch printed or the one after it (at most the epoch in
    progress is lost, nothing printed is), and best.keras scores at least the best printed.
    """
    script = tmp_path / "train_2gpus.py"
    script.write_text(_script(), encoding="utf-8")
    printed = []                                            # (epoch, val_accuracy) of every epoch line, all runs
    for name, nth, how in [("best.keras", 2, "mid"), ("state.weights.h5", 2, "mid"), ("state.weights.h5", 3, "after")]:
        run = _run(tmp_path, killpoints.command(script, name, nth, how))
        assert run.returncode == -signal.SIGKILL, (name, nth, how, run.stderr[-3000:])
        assert f"KILLED {'while writing' if how == 'mid' else 'after renaming onto'} " in run.stdout, run.stdout
        start, best = _start(run.stdout)
        last = max((k for k, _ in printed), default=0)
        assert last <= start <= last + 1, f"the last epoch printed was {last}; this run started after {start}"
        assert best >= max((v for _, v in printed), default=0.0) - 0.002, (
            f"best.keras scores {best}, below the best printed before: {printed}\n{run.stdout}")
        printed += killpoints.epochs(run.stdout)
    assert [k for k, _ in printed] == [1, 2, 3, 4], printed          # epoch 5 ended, unprinted, in the 3rd run
    _untrain(tmp_path / RUN / "state.weights.h5")

    final = _run(tmp_path, NO_HELPERS)
    assert final.returncode == 0, final.stderr[-3000:]
    start, best = _start(final.stdout)
    after = killpoints.epochs(final.stdout)
    assert start == 5 and [k for k, _ in after] == [6], final.stdout
    assert best >= max(v for _, v in printed) - 0.002 and after[0][1] < best - 0.1, (  # the set-up: a worse epoch
        f"expected epoch 6 worse than best.keras's {best}: {after}\n{final.stdout}")
    assert abs(_reloads(final.stdout) - best) < 0.002, f"best.keras lost the best ({best}):\n{final.stdout}"
    left = {p.name for p in (tmp_path / RUN).iterdir()}      # and maybe a temporary file cut by a kill, never read
    assert set(OWN) <= left <= {*OWN, "tmp-best.keras", "tmp-state.weights.h5"}, left
