#!/usr/bin/env bash
# make slurm-check: start a real one-node Slurm on this machine (tools/slurm/local_slurm.sh), run the course's
# cluster checks against it (tools/slurm/check.py: the job scripts lessons 07, 08 and 12 write, TF
# MultiWorkerMirroredStrategy under sbatch, cancelled and resubmitted, on CPU and stand-in GPU nodes, JAX and
# PyTorch under srun, each failure mode once, and every message of TROUBLESHOOTING.md's Slurm section), print each
# check's seconds and verdict, stop Slurm.
# PYTHON=... picks the environment the jobs run in (default: .venv/bin/python). Exit status: 0 all passed,
# 1 a check failed, 2 Slurm or the environment could not start (one line says why).
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-.venv/bin/python}
if ! "$PYTHON" -c 'import importlib.util as u, sys
sys.exit(any(u.find_spec(m) is None for m in ("keras", "tensorflow", "jax", "sklearn")))' 2>/dev/null; then
  echo "slurm check: $PYTHON cannot import keras, tensorflow, jax and sklearn: run make install first (or set PYTHON=...)" >&2
  exit 2
fi
exec tools/slurm/local_slurm.sh "$PYTHON" tools/slurm/check.py "$@"
