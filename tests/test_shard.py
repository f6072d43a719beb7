"""``--shard=K/N`` (tools/pytest_course.py): N sessions at once run every collected item exactly once."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _session(tmp_path, *args):
    (tmp_path / "conftest.py").write_text(f"import sys\nsys.path.insert(0, {str(ROOT / 'tools')!r})\n"
                                          "pytest_plugins = ['pytest_course']\n")
    (tmp_path / "test_a.py").write_text("import pytest\n\n@pytest.mark.parametrize('n', range(5))\n"
                                        "def test_case(n):\n    pass\n\ndef test_other():\n    pass\n")
    (tmp_path / "test_b.py").write_text("def test_b():\n    pass\n")
    env = {k: v for k, v in os.environ.items() if k != "STACK"}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v", *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, env=env)


def _ran(result) -> list:
    return re.findall(r"^(test_\S+) PASSED", result.stdout, flags=re.M)


def test_the_shards_share_every_item_out_once(tmp_path):
    everything = _ran(_session(tmp_path))
    assert len(everything) == 7
    shards = [_ran(_session(tmp_path, f"--shard={k}/3")) for k in (1, 2, 3)]
    assert sorted(sum(shards, [])) == sorted(everything)            # each item once, in one shard
    assert all(2 <= len(shard) <= 3 for shard in shards), shards   # and as many in each as can be
    assert len({n for n in everything if "test_case" in n} & set(shards[0])) >= 2   # a file's cases are shared out


@pytest.mark.parametrize("spec", ["0/2", "3/2", "two", "1/2/3"])
def test_a_bad_shard_is_refused(tmp_path, spec):
    result = _session(tmp_path, f"--shard={spec}")
    assert result.returncode != 0 and f"--shard={spec!r}" in result.stdout + result.stderr, result.stdout
