#!/usr/bin/env bash
# Owns: a throwaway single-node SLURM cluster for the tests (tests/integration/slurm_test.cpp):
# munged, slurmctld and slurmd on this machine, as root, with their configuration, state, sockets
# and logs in one folder, on ports of their own, so the tests submit real jobs without touching a
# system SLURM or munge.
# Must not: write outside that folder, or stop any process it did not start (it stops only the
# pids it wrote into the folder).
#
#   local_slurm.sh start DIR   writes DIR/slurm.conf (+ gres.conf), starts the daemons, waits for
#                              the node to be idle; prints SLURM_CONF=DIR/slurm.conf. Exit 77 with
#                              the reason on stderr when it cannot (not root, a daemon not
#                              installed, a daemon that does not come up within 30 s).
#   local_slurm.sh stop DIR    stops the daemons started in DIR.
# The node is this machine (NodeName = `hostname -s`, address 127.0.0.1), CPUs=2, one partition
# `gputune` with one generic resource gpu (its device file an empty file in the folder).
set -uo pipefail
cmd=${1:-}
dir=${2:-}
if [ -z "$cmd" ] || [ -z "$dir" ]; then
  echo "usage: local_slurm.sh start|stop DIR" >&2
  exit 2
fi
skip() {
  echo "local_slurm.sh: $*" >&2
  exit 77
}
stop() {
  local d
  for d in slurmd slurmctld munged; do
    local f="$dir/$d.pid"
    [ -f "$f" ] || continue
    local pid
    pid=$(cat "$f")
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null
    fi
    rm -f "$f"
  done
}
if [ "$cmd" = stop ]; then
  stop
  exit 0
fi
[ "$cmd" = start ] || { echo "local_slurm.sh: $cmd: give start or stop" >&2; exit 2; }

[ "$(id -u)" -eq 0 ] || skip "not root: slurmd runs jobs as their user only as root (run the tests as root)"
for b in munged slurmctld slurmd sbatch sinfo squeue; do
  command -v "$b" >/dev/null || PATH="$PATH:/usr/sbin:/sbin" command -v "$b" >/dev/null ||
    skip "$b is not installed (Debian: apt-get install slurmd slurmctld slurm-client munge)"
done
export PATH="$PATH:/usr/sbin:/sbin"
mkdir -p "$dir" && chmod 700 "$dir" || skip "cannot create $dir"
dir=$(cd "$dir" && pwd)
mkdir -p "$dir/state" "$dir/spool" "$dir/munge"
chmod 755 "$dir/munge"  # munged wants its socket reachable by all

# munge: a key of its own, its socket in the folder.
key="$dir/munge/munge.key"
if [ ! -f "$key" ]; then
  head -c 1024 /dev/urandom >"$key" || skip "cannot write a munge key"
  chmod 400 "$key"
fi
socket="$dir/munge/munge.socket"
munged --force --key-file="$key" --socket="$socket" --pid-file="$dir/munged.pid" \
  --log-file="$dir/munged.log" --seed-file="$dir/munge/munge.seed" >"$dir/munged.out" 2>&1 ||
  skip "munged did not start: $(tail -3 "$dir/munged.out" "$dir/munged.log" 2>/dev/null | tr '\n' ' ')"

# Ports of its own: 20000-29999, from the folder's name, so two clusters of parallel tests differ.
port=$((20000 + $(printf '%s' "$dir" | cksum | cut -d' ' -f1) % 5000 * 2))
node=$(hostname -s)
cat >"$dir/slurm.conf" <<CONF
ClusterName=gputunetest
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
MinJobAge=300
MaxArraySize=1001
GresTypes=gpu
NodeName=$node NodeAddr=127.0.0.1 CPUs=2 Gres=gpu:1 State=UNKNOWN
PartitionName=gputune Nodes=$node Default=YES MaxTime=INFINITE State=UP
CONF
# A generic resource gpu needs a device file: an empty regular file stands in for /dev/nvidia0.
: >"$dir/fakegpu0"
echo "Name=gpu File=$dir/fakegpu0" >"$dir/gres.conf"
export SLURM_CONF="$dir/slurm.conf"

setsid slurmctld -D -i -f "$SLURM_CONF" >"$dir/slurmctld.out" 2>&1 </dev/null &
echo $! >"$dir/slurmctld.pid.start"
setsid slurmd -D -f "$SLURM_CONF" -N "$node" >"$dir/slurmd.out" 2>&1 </dev/null &
echo $! >"$dir/slurmd.pid.start"
# The daemons write their pid files themselves; until then, the pids of the processes started.
for d in slurmctld slurmd; do [ -f "$dir/$d.pid" ] || mv "$dir/$d.pid.start" "$dir/$d.pid"; rm -f "$dir/$d.pid.start"; done

for _ in $(seq 60); do
  state=$(sinfo -h -N -o '%T' 2>/dev/null | head -1)
  [ "$state" = idle ] && { echo "SLURM_CONF=$SLURM_CONF"; exit 0; }
  for d in slurmctld slurmd; do
    kill -0 "$(cat "$dir/$d.pid" 2>/dev/null)" 2>/dev/null || {
      why=$(tail -3 "$dir/$d.out" "$dir/$d.log" 2>/dev/null | tr '\n' ' ')
      stop
      skip "$d exited while starting: $why"
    }
  done
  sleep 0.5
done
why="node state '${state:-none}' after 30 s; $(tail -2 "$dir/slurmd.log" 2>/dev/null | tr '\n' ' ')"
stop
skip "the node did not become idle: $why"
