"""``python -m helpers.cluster_cli``: :func:`helpers.cluster.run` from a terminal (every worker killed at the end)."""

from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

from .cluster import ClusterTimeoutError, run


def _split_argv(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Split ``[launcher options] (script.py | -m module) [its args]`` at the command (each option takes a value)."""
    argv, i = list(argv), 0
    while i < len(argv) and argv[i] != "-m" and argv[i].startswith("-"):
        i += 1 if argv[i] in ("-h", "--help") or "=" in argv[i] else 2
    return argv[:i], argv[i:]


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m helpers.cluster_cli",
        usage="python -m helpers.cluster_cli [options] (script.py | -m module) [args ...]",
        description="Run a TF multi-worker script as N local worker processes (TF_CONFIG set for each). "
                    "Their logs are printed at the end; everything is killed on error, timeout or Ctrl-C.")
    parser.add_argument("--workers", type=int, default=2, help="number of worker processes (default 2)")
    parser.add_argument("--ports", default=None, help="comma-separated ports (default: free ones)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds before everything is killed")
    parser.add_argument("--grace", type=float, default=5.0, help="seconds the others get after one worker fails")
    parser.add_argument("--log-dir", default=None, help="where the <task>-<index>.log files go")
    parser.add_argument("--gpus-per-worker", type=int, default=0, help="GPUs per worker (default 0: CPU)")
    own, command = _split_argv(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(own)
    if not command:
        parser.error("give a script or -m module to run")
    try:
        ports = [int(p) for p in args.ports.split(",")] if args.ports else None
        result = run(command, args.workers, timeout=args.timeout, grace=args.grace, check=False, tail=None,
                     ports=ports, log_dir=args.log_dir, gpus_per_worker=args.gpus_per_worker)
    except KeyboardInterrupt:
        print("interrupted: all workers killed", file=sys.stderr)
        return 130
    except ClusterTimeoutError as exc:  # before OSError: TimeoutError is an OSError
        print(f"timeout: {exc}", file=sys.stderr)
        return 124
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
