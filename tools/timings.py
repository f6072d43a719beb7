"""The workshop timing table, rendered from measured data so that it cannot drift.

docs/timings.json holds two measured runs of every notebook in notebooks/:

- ``two_core``: the per-notebook times of ``make notebooks`` (nbval, quick mode) on a 2-core machine,
  as written by the course's pytest plugin when ``NB_TIMES_JSON=path`` is set;
- ``one_core``: ``tools/memcheck.py --one-core --json path`` (fresh kernel per notebook, pinned to one
  CPU like Binder): wall seconds and the peak memory of the kernel and all its child processes.

Each lesson's title and what dominates its run time come from its registry entry (tools/registry.py). The table
in docs/workshop.md between the ``timings`` markers is :func:`render`'s, written by ``make sync-notebooks``
(tools/generate.py; a test fails when it is stale); tests/test_timings.py checks that every notebook has data.

Usage:
    python tools/timings.py record [--tests NB_TIMES.json] [--memcheck MEMCHECK.json] [--machine TEXT]
    python tools/timings.py check         # exit 1 if a notebook has no data (or data for one that is gone)
``make timings`` measures both runs on this machine, records them and re-renders the guide; ``make timings
LESSON=NN`` measures lesson NN alone and adds it to the recorded runs (``record --merge``: same stack only).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "docs" / "timings.json"
LIMIT_MIB = 2048
#: Versions that must agree between the two runs for them to sit in one table.
SAME_STACK = ("tensorflow", "keras", "jax")
NUMBER_WORDS = {n: w for n, w in enumerate("zero one two three four five six seven eight nine ten eleven "
                                            "twelve".split())}


def notebook_names(root: Path | None = None) -> list[str]:
    """File names of the course notebooks, in lesson order."""
    return sorted(p.name for p in ((root or ROOT) / "notebooks").glob("*.ipynb"))


def load(path: Path | None = None) -> dict:
    return json.loads(Path(path or DATA).read_text())


def save(data: dict, path: Path | None = None) -> None:
    Path(path or DATA).write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")


def machine_description() -> str:
    """A one-line description of this machine: CPUs, CPU model, memory."""
    model = ""
    try:
        model = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "")
    except OSError:
        pass
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{os.cpu_count()} CPUs{' (' + model + ')' if model else ''}, {mem_gib:.0f} GiB RAM, no GPU"


# ---- recording ----------------------------------------------------------------------------------

def _run_meta(raw: dict, machine: str, command: str, date: str | None) -> dict:
    return {"date": date or raw.get("date") or datetime.date.today().isoformat(),
            "machine": machine, "command": command, "mode": raw.get("mode", "quick"),
            "python": raw.get("python", ""), "packages": raw.get("packages", {})}


def _merged(data: dict, key: str, run: dict) -> dict:
    """``run`` (some notebooks, measured now) merged into ``data[key]``, whose other notebooks stay as measured: only
    on the same stack (the table's two runs must agree), else ValueError."""
    old = data.get(key)
    if not old:
        raise ValueError(f"no earlier {key} run to add to: run `make timings` for every lesson first")
    versions = [{k: r.get("packages", {}).get(k) for k in SAME_STACK} for r in (old, run)]
    if versions[0] != versions[1]:
        raise ValueError(f"this run's stack {versions[1]} is not the recorded one's {versions[0]}: re-measure every "
                         "lesson with `make timings`")
    notebooks = {**old["notebooks"], **{n: {**v, "date": run["date"]} for n, v in run["notebooks"].items()}}
    return {**old, "notebooks": dict(sorted(notebooks.items()))}


def record_tests(data: dict, raw: dict, machine: str, *, date: str | None = None,
                 command: str = "make notebooks", merge: bool = False) -> dict:
    """Put a conftest NB_TIMES_JSON record into ``data['two_core']`` (replacing the previous run; ``merge``: adding
    its notebooks to it, `make timings LESSON=NN`)."""
    if raw.get("mode", "quick") != "quick":
        raise ValueError(f"the table shows quick mode; this run was in {raw.get('mode')!r} mode")
    failed = sorted(n for n, v in raw.get("notebooks", {}).items() if v.get("verdict", "ok").startswith("FAILED"))
    if failed:
        raise ValueError(f"notebooks failed in this run, not recorded: {', '.join(failed)}")
    run = _run_meta(raw, machine, command, date)
    run["cpus"] = raw.get("cpus")
    run["notebooks"] = {n: {"seconds": v["seconds"]} for n, v in sorted(raw["notebooks"].items())}
    data["two_core"] = _merged(data, "two_core", run) if merge else run
    return data


def record_memcheck(data: dict, raw: dict, machine: str, *, date: str | None = None,
                    command: str = "tools/memcheck.py --one-core", merge: bool = False) -> dict:
    """Put a ``memcheck.py --one-core --json`` result into ``data['one_core']`` (replacing the previous run, or
    adding its notebooks to it: ``merge``)."""
    if not raw.get("one_core"):
        raise ValueError("this memcheck run was not pinned to one core (run it with --one-core)")
    if raw.get("mode", "quick") != "quick":
        raise ValueError(f"the table shows quick mode; this run was in {raw.get('mode')!r} mode")
    failed = sorted(n for n, v in raw["notebooks"].items() if not v["ok"])
    if failed:
        raise ValueError(f"notebooks failed in this run, not recorded: {', '.join(failed)}")
    run = _run_meta(raw, machine, command, date or raw.get("date", "")[:10] or None)
    run["notebooks"] = {n: {"seconds": v["seconds"], "peak_mib": v["peak_mib"], "peak_procs": v["peak_procs"]}
                        for n, v in sorted(raw["notebooks"].items())}
    data["one_core"] = _merged(data, "one_core", run) if merge else run
    return data


# ---- checking and rendering ---------------------------------------------------------------------

def problems(data: dict, notebooks: list[str]) -> list[str]:
    """What keeps the data from describing the course: missing/stale notebooks, mixed stacks, too much memory."""
    out = []
    for key, what in (("two_core", "2-core `make notebooks` times"), ("one_core", "one-core memcheck")):
        measured = data.get(key, {}).get("notebooks", {})
        missing = [n for n in notebooks if n not in measured]
        if missing:
            out.append(f"no {what} for: {', '.join(missing)} (run `make timings` on a quiet 2-core machine)")
        stale = [n for n in measured if n not in notebooks]
        if stale:
            out.append(f"{what} for notebooks that no longer exist: {', '.join(stale)}")
    versions = [{k: data[key].get("packages", {}).get(k) for k in SAME_STACK}
                for key in ("two_core", "one_core") if key in data]
    if len(versions) == 2 and versions[0] != versions[1]:
        out.append(f"the two runs used different stacks: {versions[0]} vs {versions[1]}")
    for n, v in data.get("one_core", {}).get("notebooks", {}).items():
        if v["peak_mib"] > LIMIT_MIB:
            out.append(f"{n}: peak {v['peak_mib']:.0f} MiB is over Binder's {LIMIT_MIB} MiB")
    return out


def _seconds(secs: float | None) -> str:
    return "not measured" if secs is None else f"{secs:.0f} s"


def _minutes(total: float) -> str:
    return f"{total:.0f} s" if total < 120 else f"about {total / 60:.0f} minutes"


def _stack(run: dict) -> str:
    p = run.get("packages", {})
    parts = [f"TensorFlow {p['tensorflow']}" if "tensorflow" in p else "",
             f"Keras {p['keras']}" if "keras" in p else "", f"JAX {p['jax']}" if "jax" in p else "",
             f"Python {run['python']}" if run.get("python") else ""]
    return ", ".join(x for x in parts if x)


def render(data: dict, lessons: list) -> str:
    """The Markdown table (with its caption) for ``lessons`` (tools/registry.py's entries: number, name, title,
    what dominates) from the measured ``data``."""
    two = data.get("two_core", {})
    one = data.get("one_core", {})
    two_nb, one_nb = two.get("notebooks", {}), one.get("notebooks", {})
    notebooks = [ls.name for ls in lessons]
    lines = []
    same = two and one and all(two.get(k) == one.get(k) for k in ("machine", "date", "python")) \
        and _stack(two) == _stack(one)
    if same:
        lines.append(f"Measured on {two['machine']}, {two['date']}; {_stack(two)}.")
        lines.append("")
    for key, run, how in (("2 cores", two, "nbval's cell times added up per notebook (kernel start included)"),
                          ("1 core (Binder-like)", one, "wall time of a fresh kernel pinned to one CPU; "
                           "**peak memory** is the most the kernel and all its child processes held at once "
                           "(PSS, sampled every 0.2 s)")):
        if run:
            where = "" if same else f" on {run['machine']}, {run['date']}; {_stack(run)}"
            lines.append(f"- **{key}**: `{run['command']}`{where}: {how}.")
    lines += ["", "| notebook | 2 cores | 1 core (Binder-like) | peak memory | what dominates |",
              "|---|---|---|---|---|"]
    for ls in lessons:
        two_s = two_nb.get(ls.name, {}).get("seconds")
        one_row = one_nb.get(ls.name, {})
        peak = f"{one_row['peak_mib']:.0f} MiB" if "peak_mib" in one_row else "not measured"
        lines.append(f"| {ls.number} {ls.title} | {_seconds(two_s)} | {_seconds(one_row.get('seconds'))} | "
                     f"{peak} | {ls.dominates} |")
    count = NUMBER_WORDS.get(len(notebooks), str(len(notebooks)))
    if notebooks and all(n in two_nb for n in notebooks) and all(n in one_nb for n in notebooks):
        lines.append(f"| **all {count}** | **{_minutes(sum(two_nb[n]['seconds'] for n in notebooks))}** | "
                     f"**{_minutes(sum(one_nb[n]['seconds'] for n in notebooks))}** | "
                     f"**at most {max(one_nb[n]['peak_mib'] for n in notebooks):.0f} MiB** | |")
    else:
        lines.append(f"| **all {count}** | not all measured yet | not all measured yet | | |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    rec = sub.add_parser("record", help="record measured runs into docs/timings.json")
    rec.add_argument("--tests", type=Path, help="NB_TIMES_JSON file of a quick-mode `make notebooks` run")
    rec.add_argument("--memcheck", type=Path, help="JSON of `tools/memcheck.py --one-core --json`")
    rec.add_argument("--machine", default="", help="describe the machine (default: CPUs, model, memory)")
    rec.add_argument("--date", help="YYYY-MM-DD (default: today / the memcheck run's date)")
    rec.add_argument("--merge", action="store_true", help="add the measured notebooks to the recorded runs "
                     "(`make timings LESSON=NN`) instead of replacing them")
    sub.add_parser("check", help="exit 1 if a notebook has no data, or there is data for one that is gone")
    args = parser.parse_args(argv)
    data, names = load(), notebook_names()
    if args.cmd == "record":
        if not args.tests and not args.memcheck:
            parser.error("record needs --tests and/or --memcheck")
        machine = args.machine or machine_description()
        if args.tests:
            record_tests(data, load(args.tests), machine, date=args.date, merge=args.merge)
        if args.memcheck:
            record_memcheck(data, load(args.memcheck), machine, date=args.date, merge=args.merge)
        save(data)
        print(f"timings: recorded into {DATA.relative_to(ROOT)}")
        print("timings: now run `make sync-notebooks` to re-render the guide's table")
    found = problems(data, names)
    for line in found:
        print(f"timings: {line}", file=sys.stderr)
    return 1 if found and args.cmd == "check" else 0


if __name__ == "__main__":
    sys.exit(main())
