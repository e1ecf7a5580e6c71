#!/usr/bin/env bash
# A real single-host Slurm cluster for faultline's tests and for trying the Slurm launcher:
# munged, slurmctld and four slurmd (virtual nodes n1..n4 on this host, a port each), all
# started without systemd from Debian's packages, configured in one directory and stopped by
# their pid files. Usage: scripts/slurm-local.sh start|stop|env|status
#   start  brings the cluster up (or says why it cannot) and prints the exports to use it
#   env    prints the exports: eval "$(scripts/slurm-local.sh env)"
#   stop   stops every daemon it started and removes nothing else
# The directory is $FAULTLINE_SLURM_DIR (default /tmp/faultline-slurm-<uid>); why a start failed
# is kept in its start-failure.txt, which the tests labelled `slurm` print when they skip.
# Accounting is off (no slurmdbd): sacct does not work; a finished job's state comes from
# `scontrol show job` while slurmctld still knows it (MinJobAge=3600 s here).
set -euo pipefail

dir="${FAULTLINE_SLURM_DIR:-/tmp/faultline-slurm-$(id -u)}"
conf="$dir/slurm.conf"
nodes=(n1 n2 n3 n4)
ctld_port="${FAULTLINE_SLURM_PORT:-16817}"
cpus_per_node=4

say() { echo "slurm-local: $*" >&2; }
fail() {
  say "cannot start: $*"
  mkdir -p "$dir" && echo "$*" >"$dir/start-failure.txt"
  exit 1
}

print_env() {
  echo "export SLURM_CONF=$conf"
  echo "export FAULTLINE_SLURM_DIR=$dir"
}

# A zombie (a daemon killed where nobody reaps it) answers kill -0 but is not running.
pid_alive() {
  [ -f "$1" ] || return 1
  local pid
  pid="$(cat "$1")"
  kill -0 "$pid" 2>/dev/null && ! grep -q '^State:[[:space:]]*Z' "/proc/$pid/status" 2>/dev/null
}

write_config() {
  local host
  host="$(hostname)"
  mkdir -p "$dir"/{state,log,run,munge}
  for n in "${nodes[@]}"; do mkdir -p "$dir/spool/$n"; done
  chmod 755 "$dir/munge"
  cat >"$conf" <<EOF
# Written by scripts/slurm-local.sh: one host, four virtual nodes, no cgroups, no accounting.
ClusterName=faultline
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmUser=$(id -un)
SlurmdUser=$(id -un)
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
MinJobAge=3600
KillWait=5
InactiveLimit=0
Waittime=0
NodeName=DEFAULT CPUs=$cpus_per_node RealMemory=1000 State=UNKNOWN
EOF
  local port=$((ctld_port + 1))
  for n in "${nodes[@]}"; do
    echo "NodeName=$n NodeHostname=$host NodeAddr=127.0.0.1 Port=$port" >>"$conf"
    port=$((port + 1))
  done
  echo "PartitionName=debug Nodes=$(
    IFS=,
    echo "${nodes[*]}"
  ) Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO" >>"$conf"
}

start_munge() {
  local key="$dir/munge/munge.key"
  [ -f "$key" ] || mungekey --create --keyfile="$key" >/dev/null 2>&1 ||
    dd if=/dev/urandom of="$key" bs=1024 count=1 status=none
  chmod 400 "$key"
  pid_alive "$dir/munge/munged.pid" && return 0
  munged --force --key-file="$key" --socket="$dir/munge/munge.socket" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" \
    --seed-file="$dir/munge/munged.seed" ||
    fail "munged did not start: $(tail -3 "$dir/log/munged.log" 2>/dev/null)"
}

# A node is ready when it answers: idle, or running jobs (mix, alloc) of a cluster this script
# found already up, whose jobs are somebody's tests. A suffix (idle*, idle~) means it does not.
wait_nodes_ready() {
  local deadline=$((SECONDS + 60)) states
  while [ $SECONDS -lt $deadline ]; do
    states="$(SLURM_CONF=$conf sinfo -h -N -o '%N %t' 2>/dev/null || true)"
    if [ "$(grep -cE ' (idle|mix|alloc)$' <<<"$states" || true)" -eq ${#nodes[@]} ]; then return 0; fi
    sleep 0.5
  done
  fail "nodes not ready after 60 s: $(tr '\n' ' ' <<<"$states"); see $dir/log"
}

start() {
  for tool in munged mungekey slurmctld slurmd sinfo srun sbatch; do
    command -v "$tool" >/dev/null || fail "$tool is not installed (bash scripts/install-deps.sh)"
  done
  local t0=$SECONDS
  rm -f "$dir/start-failure.txt"
  write_config
  start_munge
  export SLURM_CONF="$conf"
  if ! pid_alive "$dir/run/slurmctld.pid"; then
    # -c: jobs saved by a controller that died with its machine (a session that ended mid-test)
    # would be recovered as running and hold their nodes until a timeout; a controller started
    # here starts with no jobs.
    slurmctld -c -i || fail "slurmctld did not start: $(tail -5 "$dir/log/slurmctld.log" 2>/dev/null)"
  fi
  for n in "${nodes[@]}"; do
    pid_alive "$dir/run/slurmd.$n.pid" && continue
    slurmd -N "$n" || fail "slurmd -N $n did not start: $(tail -5 "$dir/log/slurmd.$n.log")"
  done
  wait_nodes_ready
  say "up in $((SECONDS - t0)) s: nodes ${nodes[*]} on $(hostname), config $conf"
  print_env
}

stop() {
  local pids=()
  for file in "$dir"/run/slurmd.*.pid "$dir/run/slurmctld.pid" "$dir/munge/munged.pid"; do
    pid_alive "$file" || continue
    pids+=("$(cat "$file")")
    kill "$(cat "$file")" 2>/dev/null || true
  done
  local deadline=$((SECONDS + 20))
  for pid in "${pids[@]}"; do
    while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
  done
  say "stopped ${#pids[@]} daemon(s)"
}

status() {
  pid_alive "$dir/run/slurmctld.pid" || {
    say "not running"
    exit 1
  }
  SLURM_CONF=$conf sinfo -N
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  env) print_env ;;
  status) status ;;
  *)
    echo "usage: $0 start|stop|env|status" >&2
    exit 2
    ;;
esac
