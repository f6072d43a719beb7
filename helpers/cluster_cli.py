"""The command line of the local multi-worker launcher: ``python -m helpers.cluster_cli``.

Why: the same launcher as :class:`helpers.cluster.LocalCluster` from a terminal - logs stream
live, and every worker is killed on error, timeout or Ctrl-C::

    python -m helpers.cluster_cli --workers 2 mwms_train.py --epochs 3
    python -m helpers.cluster_cli --workers 2 -m my_package.train --lr 0.01
"""

from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

from .cluster import HOST, ClusterTimeoutError, LocalCluster


def _split_argv(argv: Sequence[str], value_opts: Sequence[str]) -> tuple[list[str], list[str]]:
    """Split ``[launcher options] (script.py | -m module) [its args]`` at the command."""
    argv = list(argv)
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok == "-m" or not tok.startswith("-"):
            return argv[:i], argv[i:]
        i += 2 if tok in value_opts else 1
    return argv, []


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m helpers.cluster_cli",
        usage="python -m helpers.cluster_cli [options] (script.py | -m module) [args ...]",
        description="Run a TF multi-worker script as N local worker processes (TF_CONFIG set for each). "
                    "Logs stream to the terminal; everything is killed on error, timeout or Ctrl-C.",
        epilog="examples:\n  python -m helpers.cluster_cli --workers 2 mwms_train.py --out /tmp/run\n"
               "  python -m helpers.cluster_cli --workers 2 -m my_package.train --lr 0.1",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2, help="number of worker processes (default 2)")
    parser.add_argument("--host", default=HOST, help=f"address to bind (default {HOST})")
    parser.add_argument("--ports", default=None, help="comma-separated ports (default: free ones)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds before everything is killed")
    parser.add_argument("--grace", type=float, default=5.0, help="seconds the others get after one worker fails")
    parser.add_argument("--log-dir", default=None, help="where the <task>-<index>.log files go")
    parser.add_argument("--gpus-per-worker", type=int, default=0, help="GPUs per worker (default 0: CPU)")
    value_opts = [o for a in parser._actions if a.nargs is None and a.option_strings for o in a.option_strings]
    own, command = _split_argv(sys.argv[1:] if argv is None else argv, value_opts)
    args = parser.parse_args(own)
    if not command:
        parser.error("give a script or -m module to run")
    try:
        ports = [int(p) for p in args.ports.split(",")] if args.ports else None
        cluster = LocalCluster(command, args.workers, ports=ports, host=args.host, log_dir=args.log_dir,
                               gpus_per_worker=args.gpus_per_worker)
        with cluster:
            print(f"started {len(cluster.procs)} worker(s): {cluster.spec} - logs in {cluster.log_dir}", flush=True)
            result = cluster.wait(timeout=args.timeout, grace=args.grace, follow=True)
    except KeyboardInterrupt:
        print("interrupted: all workers killed", file=sys.stderr)
        return 130
    except ClusterTimeoutError as exc:  # before OSError: TimeoutError is an OSError
        print(f"timeout: {exc}", file=sys.stderr)
        return 124
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for w in result.workers:
        print(w.describe())
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
