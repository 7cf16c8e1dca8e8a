#!/usr/bin/env bash
# A single-node SLURM cluster on this machine, with real job accounting (sacct), for the
# integration tests in tests/integration/ (pytest -m slurm). As root, no systemd needed:
#
#   scripts/slurm_cluster.sh up      # ~15 s; installs Debian's packages if they are missing
#   export SLURM_CONF=/var/lib/per-atari-slurm/slurm.conf
#   scripts/slurm_cluster.sh down    # stops its daemons and removes their state
#   scripts/slurm_cluster.sh node    # the node's CPUs and memory, as `up` sizes it (starts nothing)
#
# Everything the cluster owns lives in $SLURM_CLUSTER_DIR (daemons' state, logs, sockets, the
# MUNGE key, the database) and listens on its own ports, so a SLURM, MUNGE or MariaDB already
# installed here is left alone. Jobs are tracked by their process tree (proctrack/linuxproc,
# no cgroups): slurmd never adopts, signals or limits a process it did not start.
set -euo pipefail

DIR=${SLURM_CLUSTER_DIR:-/var/lib/per-atari-slurm}
export SLURM_CONF=$DIR/slurm.conf
CLUSTER=per-atari
PARTITION=debug
NODE=localnode
CTLD_PORT=16817
SLURMD_PORT=16818
DBD_PORT=16819
DB_PORT=16820
PACKAGES=(slurmctld slurmd slurmdbd slurm-client munge mariadb-server)

log() { echo "slurm_cluster: $*" >&2; }

# Poll `$@` every 0.2 s for up to $timeout seconds; fail with the daemon's log otherwise.
wait_for() {
  local what=$1 logfile=$2 timeout=$3
  shift 3
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      log "$what did not come up in ${timeout} s; the end of $logfile:"
      tail -n 20 "$logfile" >&2 || true
      exit 1
    fi
    sleep 0.2
  done
}

install_packages() {
  local missing=()
  for package in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
      missing+=("$package")
  done
  if ((${#missing[@]})); then
    log "installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

# The node is the whole machine: its online CPUs (not `nproc`, which follows OMP_NUM_THREADS and
# this shell's CPU affinity) and its memory in MB.
node() {
  echo "CPUs=$(getconf _NPROCESSORS_ONLN) RealMemory=$(($(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024))"
}

write_configs() {
  cat >"$SLURM_CONF" <<EOF
ClusterName=$CLUSTER
SlurmctldHost=$(hostname -s)(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
# cred_expire is also how long a requeued job waits before it may start again (120 s by
# default); the tests update the requeued job's start time instead, as an admin would.
AuthInfo=socket=$DIR/munge.socket
StateSaveLocation=$DIR/slurmctld
SlurmdSpoolDir=$DIR/slurmd
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$DBD_PORT
# The MUNGE socket for talking to slurmdbd (AuthInfo's is for the rest).
AccountingStoragePass=$DIR/munge.socket
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MailProg=/bin/true
PlugStackConfig=$DIR/plugstack.conf
NodeName=$NODE NodeHostname=$(hostname -s) NodeAddr=127.0.0.1 $(node) State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
  : >"$DIR/plugstack.conf"
  cat >"$DIR/slurmdbd.conf" <<EOF
AuthInfo=socket=$DIR/munge.socket
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
PidFile=$DIR/slurmdbd.pid
LogFile=$DIR/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=slurm
StorageLoc=slurm_acct_db
EOF
  chmod 600 "$DIR/slurmdbd.conf"
}

start_munge() {
  dd if=/dev/urandom of="$DIR/munge.key" bs=1024 count=1 status=none
  chmod 400 "$DIR/munge.key"
  munged --force --key-file="$DIR/munge.key" --socket="$DIR/munge.socket" \
    --pid-file="$DIR/munged.pid" --log-file="$DIR/munged.log" --seed-file="$DIR/munged.seed"
  wait_for munged "$DIR/munged.log" 10 sh -c "munge -n -S '$DIR/munge.socket' | unmunge -S '$DIR/munge.socket'"
}

start_database() {
  mariadb-install-db --no-defaults --user=root --datadir="$DIR/mysql" --skip-test-db \
    --auth-root-authentication-method=socket >"$DIR/mariadb-install.log" 2>&1
  # Started in the background (the `&`): it does not fork by itself.
  mariadbd --no-defaults --user=root --datadir="$DIR/mysql" --socket="$DIR/mysql.socket" \
    --bind-address=127.0.0.1 --port="$DB_PORT" --pid-file="$DIR/mariadbd.pid" \
    --log-error="$DIR/mariadbd.log" --innodb-buffer-pool-size=64M >/dev/null 2>&1 &
  wait_for mariadbd "$DIR/mariadbd.log" 30 mariadb-admin --no-defaults --socket="$DIR/mysql.socket" ping
  mariadb --no-defaults --socket="$DIR/mysql.socket" -e "
    CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurm';
    GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"
}

start_slurm() {
  mkdir -p "$DIR/slurmctld" "$DIR/slurmd"
  slurmdbd  # reads slurmdbd.conf beside $SLURM_CONF
  wait_for slurmdbd "$DIR/slurmdbd.log" 30 sacctmgr --noheader show cluster
  sacctmgr --immediate add cluster "$CLUSTER" >/dev/null
  slurmctld -f "$SLURM_CONF"
  wait_for slurmctld "$DIR/slurmctld.log" 30 scontrol ping
  slurmd -f "$SLURM_CONF" -N "$NODE"
  wait_for slurmd "$DIR/slurmd.log" 30 sh -c "sinfo --noheader --responding -o %t | grep -qx idle"
}

up() {
  if [ "$(id -u)" -ne 0 ]; then
    log "must run as root (it starts munged, mariadbd, slurmdbd, slurmctld and slurmd)"
    exit 1
  fi
  if [ -e "$DIR" ]; then
    log "$DIR exists: a cluster is up, or was not torn down; run: $0 down"
    exit 1
  fi
  install_packages
  mkdir -p "$DIR"
  trap 'log "bring-up failed: tearing down"; down' EXIT
  write_configs
  start_munge
  start_database
  start_slurm
  trap - EXIT
  log "up in ${SECONDS} s: partition $PARTITION, node $NODE ($(node)); export SLURM_CONF=$SLURM_CONF"
}

# Stop the daemon whose pid file is $1 (only that process) and wait up to 10 s for it to exit.
stop() {
  local pid
  pid=$(cat "$1" 2>/dev/null) || return 0
  kill "$pid" 2>/dev/null || return 0
  timeout 10 tail --pid="$pid" -s 0.1 -f /dev/null || kill -KILL "$pid" 2>/dev/null || true
}

down() {
  [ -e "$DIR" ] || return 0
  if [ -f "$DIR/slurmctld.pid" ] && scontrol ping >/dev/null 2>&1; then
    # This cluster's own jobs only: the tests' sweeps, if a failed test left any running.
    squeue --noheader -o %A | sort -u | xargs -r scancel || true
  fi
  for daemon in slurmd slurmctld slurmdbd mariadbd munged; do
    stop "$DIR/$daemon.pid"
  done
  rm -rf "$DIR"
  log "down"
}

case ${1:-} in
up | down | node) "$1" ;;
*)
  echo "usage: $0 up|down|node" >&2
  exit 2
  ;;
esac
