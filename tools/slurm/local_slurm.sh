#!/usr/bin/env bash
# A real one-node Slurm on this machine, for the course's cluster checks.
#
#   tools/slurm/local_slurm.sh COMMAND [ARGS...]
#
# Installs Debian's slurm-wlm and munge where they are missing (apt-get, non-interactive), writes a munge key and
# a one-node slurm.conf (this machine's hostname and its real CPU count) into a temporary folder, starts munged,
# slurmctld and slurmd in the foreground without systemd, waits until `sinfo` shows the node idle, runs COMMAND
# with SLURM_CONF (and LOCAL_SLURM_DIR, the folder) exported, then stops every daemon and exits with COMMAND's
# status. Everything runs in a PID namespace of its own where unshare allows it: when the script ends, however it
# ends, the kernel kills whatever is left in it (job steps included), so no daemon is ever left behind.
#
# The node also has 2 stand-in GPUs (GRES gpu:2): two character devices like /dev/null that Slurm schedules as
# GPUs, so --gres=gpu:N and --gpus-per-task set SLURM_GPUS_ON_NODE and CUDA_VISIBLE_DEVICES as on a GPU node
# (nothing can compute on them). LOCAL_SLURM_GPUS says how many there are: 0 where mknod is refused.
#
# Where Slurm cannot start (not root, no packages and no apt, a daemon that exits), it prints one line that
# starts with "local Slurm:" and says why, and exits 2. It never passes silently.
set -euo pipefail

die() { echo "local Slurm: $*" >&2; exit 2; }

[ $# -ge 1 ] || die "usage: $0 COMMAND [ARGS...]"
[ "$(id -u)" = 0 ] || die "needs root (munged, slurmctld and slurmd run as root here); run it as root or in CI"

# A PID namespace of our own: every process this script starts dies with it.
if [ -z "${LOCAL_SLURM_NS:-}" ] && unshare --pid --fork --kill-child --mount-proc true 2>/dev/null; then
  LOCAL_SLURM_NS=1 exec unshare --pid --fork --kill-child --mount-proc "$0" "$@"
fi

need=()
for tool in munged slurmctld slurmd sinfo sbatch srun scontrol; do
  command -v "$tool" >/dev/null || need+=("$tool")
done
if [ ${#need[@]} -gt 0 ]; then
  command -v apt-get >/dev/null || die "${need[*]} missing and no apt-get to install slurm-wlm and munge"
  t0=$SECONDS
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      slurm-wlm munge; } >/tmp/local-slurm-apt.log 2>&1 \
    || die "apt-get install slurm-wlm munge failed (no network for apt?): $(tail -n 1 /tmp/local-slurm-apt.log)"
  echo "local Slurm: installed slurm-wlm and munge in $((SECONDS - t0)) s"
fi

DIR=$(mktemp -d /tmp/local-slurm.XXXXXX)
chmod 700 "$DIR"
mkdir -p "$DIR/munge" "$DIR/state" "$DIR/spool" "$DIR/jobs"
chmod 777 "$DIR/jobs"   # job output lands here
NODE=$(hostname -s)
CPUS=$(nproc)
pids=()

stop() {
  local rc=$?
  set +e
  if [ -f "$DIR/slurm.conf" ] && [ -n "${SLURM_CONF:-}" ]; then
    scancel --full --quiet --user=root 2>/dev/null
  fi
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do      # slurmd, slurmctld, munged: last started, first stopped
    kill -TERM "${pids[i]}" 2>/dev/null
  done
  for pid in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  rm -rf "$DIR"
  exit "$rc"
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Two free TCP ports of 127.0.0.1 for slurmctld and slurmd (a system Slurm may hold 6817/6818).
read -r CTLD_PORT SLURMD_PORT < <(python3 -c '
import socket
ss = [socket.socket() for _ in range(2)]
for s in ss:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in ss))')

head -c 1024 /dev/urandom >"$DIR/munge/munge.key"
chmod 400 "$DIR/munge/munge.key"
cat >"$DIR/slurm.conf" <<EOF
# One-node Slurm written by tools/slurm/local_slurm.sh (a temporary folder, removed on exit).
ClusterName=local
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$DIR/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd.log
# No cgroups here (containers, CI): processes are tracked through /proc, tasks are not bound to CPUs.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MailProg=/bin/true
KillWait=2
MinJobAge=600
SlurmdParameters=config_overrides
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS State=UNKNOWN
PartitionName=local Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
GPUS=0   # the stand-in GPUs: Slurm only checks that each File= is a character device
if mknod "$DIR/gpu0" c 1 3 2>/dev/null && mknod "$DIR/gpu1" c 1 3 2>/dev/null; then
  GPUS=2
  sed -i "s/^NodeName=.*State=UNKNOWN$/& Gres=gpu:2/; s/^ProctrackType=/GresTypes=gpu\n&/" "$DIR/slurm.conf"
  echo "NodeName=$NODE Name=gpu File=$DIR/gpu[0-1]" >"$DIR/gres.conf"
fi
export SLURM_CONF=$DIR/slurm.conf LOCAL_SLURM_DIR=$DIR LOCAL_SLURM_GPUS=$GPUS

started() {  # name pid log: fail in one line if the daemon already exited
  kill -0 "$2" 2>/dev/null || die "$1 exited at start: $(grep -v '^\s*$' "$3" 2>/dev/null | tail -n 1)"
}
t0=$EPOCHREALTIME
munged --foreground --force --key-file="$DIR/munge/munge.key" --socket="$DIR/munge/munge.socket" \
  --pid-file="$DIR/munge/munged.pid" --log-file="$DIR/munge/munged.log" --seed-file="$DIR/munge/munged.seed" \
  >"$DIR/munged.out" 2>&1 &
pids+=($!)
for _ in $(seq 50); do [ -S "$DIR/munge/munge.socket" ] && break; started munged "${pids[0]}" "$DIR/munge/munged.log"; sleep 0.1; done
[ -S "$DIR/munge/munge.socket" ] || die "munged did not open its socket in 5 s: $(tail -n 1 "$DIR/munge/munged.log")"
slurmctld -D -f "$SLURM_CONF" >"$DIR/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" -N "$NODE" >"$DIR/slurmd.out" 2>&1 &
pids+=($!)
state=""
for _ in $(seq 300); do
  started slurmctld "${pids[1]}" "$DIR/slurmctld.log"
  started slurmd "${pids[2]}" "$DIR/slurmd.log"
  state=$(sinfo --noheader --nodes="$NODE" --format=%t 2>/dev/null || true)
  [ "$state" = idle ] && break
  sleep 0.1
done
[ "$state" = idle ] || die "node $NODE not idle after 30 s (sinfo says '${state:-nothing}'): $(tail -n 1 "$DIR/slurmd.log")"
echo "local Slurm: node $NODE idle with $CPUS CPU(s) and $GPUS stand-in GPU(s), daemons started in $(awk "BEGIN { printf \"%.1f\", $EPOCHREALTIME - $t0 }") s"

set +e
"$@"
