#!/usr/bin/env bash
# rgw.sh — a throw-away, one-node Ceph RADOS Gateway (S3) for integration tests.
#
# Usage:
#   tests/s3/rgw.sh install   # apt-get the Ceph packages (no-op when already present)
#   tests/s3/rgw.sh start     # install if needed, create or restart the cluster, wait for S3
#   tests/s3/rgw.sh stop      # stop the daemons (TERM, then KILL), keep the data
#   tests/s3/rgw.sh destroy   # stop and delete the data dir
#   tests/s3/rgw.sh status    # print which daemons are running (exit 1 if not all three)
#   tests/s3/rgw.sh env       # print `export AWS_...` lines: eval "$(tests/s3/rgw.sh env)"
#   tests/s3/rgw.sh gc        # collect deleted objects now (benchmarks: not under the next side's time)
#
# Environment:
#   HUB_RGW_DIR      data dir, default /tmp/hub-rgw (config, mon/osd data, logs, pid files)
#   HUB_RGW_PORT     S3 (beast) port on 127.0.0.1, default 7480
#   HUB_RGW_MON_PORT monitor msgr2 port on 127.0.0.1, default 3300
#   HUB_RGW_TIMEOUT  seconds to wait for S3 to answer on start, default 120
#
# Why a real cluster: Debian 12 ships Ceph 16.2 (Pacific), whose radosgw has no standalone
# backend (dbstore arrived in 17.x), so radosgw needs RADOS underneath: one ceph-mon, one
# ceph-osd (BlueStore on a sparse file) and radosgw itself. There is no systemd/Docker here,
# so the daemons are started by hand, detached, and stopped by PID. Nothing goes to /etc:
# every command gets the generated ceph.conf through CEPH_CONF and -c.
# Facts and figures behind the settings: /work/shared/docs/s3-engines.md.

set -euo pipefail

DIR=${HUB_RGW_DIR:-/tmp/hub-rgw}
DIR=$(realpath -m -- "$DIR")   # absolute: the paths end up in ceph.conf, read by detached daemons
PORT=${HUB_RGW_PORT:-7480}
MON_PORT=${HUB_RGW_MON_PORT:-3300}
TIMEOUT=${HUB_RGW_TIMEOUT:-120}

ACCESS_KEY=hubtest
SECRET_KEY=hubtestsecret
REGION=us-east-1
ENDPOINT="http://127.0.0.1:${PORT}"

MON_ID=a
OSD_ID=0            # the first `ceph osd new` on a fresh cluster always returns 0
RGW_NAME=client.rgw.hub

CONF="$DIR/ceph.conf"
LOG_DIR="$DIR/log"
RUN_DIR="$DIR/run"
# Written only once mkfs of mon AND osd fully succeeded; holds "<fsid> <mon port>" (the mon port
# is baked into the monmap at creation, so a restart must keep using it).
READY_MARK="$DIR/cluster.created"

export CEPH_CONF="$CONF"

# Every ceph CLI call gets a hard timeout: with the mon down, `ceph` would otherwise retry forever.
CEPH_CLI_TIMEOUT=30

PACKAGES=(ceph-mon ceph-osd radosgw ceph-common)
BINARIES=(ceph-mon ceph-osd radosgw radosgw-admin ceph monmaptool)

log() { printf '[rgw.sh] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# ---------------------------------------------------------------------------------------------
# install
# ---------------------------------------------------------------------------------------------
packages_present() {
    local b
    for b in "${BINARIES[@]}"; do
        command -v "$b" >/dev/null 2>&1 || [ -x "/usr/bin/$b" ] || return 1
    done
}

cmd_install() {
    if packages_present; then
        return 0
    fi
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 || die "Ceph is not installed and we are not root (no sudo either)"
        sudo=(sudo)
    fi
    log "installing ${PACKAGES[*]} (one-time, ~25 s)"
    # `apt-get update` only here, i.e. only when something is missing: the package lists of a
    # fresh machine/container are usually empty, and updating on every start would be slow.
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    # --no-install-recommends keeps it to ~64 MB (no mgr/dashboard/python stacks).
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" >/dev/null
    packages_present || die "packages installed but binaries still missing: ${BINARIES[*]}"
}

# ---------------------------------------------------------------------------------------------
# process helpers (pid files live in $RUN_DIR, one per daemon)
# ---------------------------------------------------------------------------------------------
pidfile() { echo "$RUN_DIR/$1.pid"; }

# Does PID $1 exist and is it not a zombie? The daemons are re-parented to PID 1 once this script
# exits, and a killed daemon can linger as a zombie until PID 1 reaps it: kill -0 alone would
# still call that "running".
pid_running() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    stat=${stat##*) }                    # fields after "pid (comm) "; the first is the state
    [ "${stat:0:1}" != Z ]
}

# Is the daemon recorded in pid file $1 alive? We also check the process' executable name so a
# stale pid file whose PID got reused by something else is not mistaken for our daemon.
daemon_alive() {
    local name=$1 exe=$2 pf pid
    pf=$(pidfile "$name")
    [ -s "$pf" ] || return 1
    pid=$(cat "$pf")
    [ -n "$pid" ] && pid_running "$pid" || return 1
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$exe" ] || return 1
}

# Start a daemon in the foreground mode of Ceph (-f), but detached from us:
#  - setsid: own session, so Ctrl-C / SIGHUP of the calling shell or test runner does not kill it
#    (setsid execs in place because a background child of a script is not a group leader,
#    so $! is the daemon's own PID);
#  - -f instead of Ceph's self-daemonizing: we keep the real PID and catch early crashes on stderr.
# Daemon logs go to $LOG_DIR/<name>.log (log_file in ceph.conf); stdout/stderr to <name>.out.
spawn() {
    local name=$1; shift
    # 9>&- : do not let the daemon inherit the lock fd (see with_lock), or it would hold the lock
    # for its whole life and the next start/stop would block.
    setsid "$@" -f </dev/null >"$LOG_DIR/$name.out" 2>&1 9>&- &
    echo $! >"$(pidfile "$name")"
}

# TERM, wait up to $2 seconds, then KILL. Only ever signals the PID from our own pid file.
stop_daemon() {
    local name=$1 exe=$2 wait_s=${3:-15} pf pid i
    pf=$(pidfile "$name")
    if ! daemon_alive "$name" "$exe"; then
        rm -f "$pf"
        return 0
    fi
    pid=$(cat "$pf")
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < wait_s * 10; i++)); do
        pid_running "$pid" || break
        sleep 0.1
    done
    if pid_running "$pid"; then
        log "$name (pid $pid) ignored TERM for ${wait_s}s, sending KILL"
        kill -KILL "$pid" 2>/dev/null || true
        for ((i = 0; i < 50; i++)); do pid_running "$pid" || break; sleep 0.1; done
    fi
    rm -f "$pf"
}

ceph_cli() { timeout "$CEPH_CLI_TIMEOUT" ceph -c "$CONF" "$@"; }
rgw_admin() { timeout "$CEPH_CLI_TIMEOUT" radosgw-admin -c "$CONF" "$@"; }

dump_logs() {
    local f
    for f in "$LOG_DIR"/*; do
        [ -s "$f" ] || continue
        printf '\n===== tail -n 25 %s =====\n' "$f" >&2
        tail -n 25 "$f" >&2
    done
}

# ---------------------------------------------------------------------------------------------
# configuration
# ---------------------------------------------------------------------------------------------
write_conf() {
    local fsid=$1
    # `$cluster`, `$name`, `$id` below are Ceph metavariables (expanded by Ceph, not by bash).
    cat >"$CONF" <<EOF
# Generated by tests/s3/rgw.sh — one-node test cluster, do not use for anything real.
[global]
fsid = $fsid
# Monitor on msgr2 only, loopback only. msgr1 is not needed: every client is the same Pacific build.
mon_host = v2:127.0.0.1:$MON_PORT
public_addr = 127.0.0.1
cluster_addr = 127.0.0.1
ms_bind_msgr1 = false
ms_bind_msgr2 = true

# No cephx: nothing to distribute. ms_mon_client_mode = crc is REQUIRED with auth none, otherwise
# radosgw hangs at start with "get_initial_auth_request returned -13" (it asks for secure mode).
auth_cluster_required = none
auth_service_required = none
auth_client_required = none
ms_mon_client_mode = crc

# Everything (sockets, logs) under the data dir, nothing in /var or /etc.
run_dir = $RUN_DIR
admin_socket = $RUN_DIR/\$cluster-\$name.asok
log_file = $LOG_DIR/\$name.log
log_to_stderr = false
err_to_stderr = true
# Keep log volume modest; raise e.g. debug_rgw to 20 when debugging a request.
debug_ms = 0
# RocksDB (inside the mon and BlueStore) dumps hundreds of option lines per open at its default level.
debug_rocksdb = 1/5
log_max_recent = 500

# One OSD -> one replica. Without mon_allow_pool_size_one the mon refuses size-1 pools; the
# chooseleaf type 0 (osd) lets CRUSH place PGs with a single host/OSD.
osd_pool_default_size = 1
osd_pool_default_min_size = 1
mon_allow_pool_size_one = true
osd_crush_chooseleaf_type = 0
# radosgw creates ~7 pools; 8 PGs each keeps the OSD light. No mgr runs, so no autoscaler anyway,
# but say so explicitly so nothing tries to grow pg_num.
osd_pool_default_pg_num = 8
osd_pool_default_pgp_num = 8
osd_pool_default_pg_autoscale_mode = off
mon_max_pg_per_osd = 1000
rgw_rados_pool_pg_num_min = 8
# Silence health warnings that are expected here (no redundancy, no mgr).
mon_warn_on_pool_no_redundancy = false
mon_warn_on_insecure_global_id_reclaim_allowed = false
mon_warn_on_osd_down_out_interval_zero = false
mon_allow_pool_delete = true
# A test box fills the OSD with uploads of GBs; refuse writes only when it is really full (the
# defaults stop backfill at 90 % and, with one OSD, make every write wait).
mon_osd_nearfull_ratio = 0.90
mon_osd_backfillfull_ratio = 0.95
mon_osd_full_ratio = 0.97

[mon]
mon_data = $DIR/mon/\$cluster-\$id
# Paxos commits every 0.1 s instead of 1 s: radosgw's first start creates its pools one by one,
# cold start drops from ~36 s to ~8 s.
paxos_propose_interval = 0.1
# The mon shuts itself down when its disk has < 5 % free; a dev box or CI runner is often fuller.
mon_data_avail_crit = 1
mon_data_avail_warn = 2
# One OSD: do not wait for reporters from other hosts, do not mark it out.
mon_osd_min_down_reporters = 1
mon_osd_down_out_interval = 0

[osd]
osd_data = $DIR/osd/\$cluster-\$id
osd_objectstore = bluestore
# BlueStore on a sparse 40 GiB file (only written blocks use disk). Not memstore: it keeps every
# object in RAM and grows to GBs.
# bluestore_block_path is left unset on purpose: the default is the plain file <osd_data>/block;
# setting it to that same path makes mkfs symlink block -> itself (ELOOP, "Too many levels of
# symbolic links").
bluestore_block_create = true
bluestore_block_size = 42949672960
bluestore_block_db_create = false
bluestore_block_wal_create = false
bluestore_block_preallocate_file = false
# ~1 GiB instead of the 4 GiB default (BlueStore sizes its caches to this target).
osd_memory_target = 1073741824
# The OSD puts itself into the CRUSH map on boot (host bucket = this machine's hostname).
osd_crush_update_on_start = true
# radosgw instances "watch" RADOS objects for cache invalidation, and every metadata write
# (create_bucket, user changes) notifies all watchers and waits for their answer. A radosgw that
# died without unwatching (SIGKILL) leaves a watch the OSD only drops after this timeout (default
# 30 s, re-armed on every OSD restart): meanwhile each create_bucket hangs 10-30 s. Live clients
# ping every objecter tick (1 s, see [client]), so 10 s is still a wide margin.
osd_client_watch_timeout = 10

[client]
# RADOS clients (radosgw, radosgw-admin) re-ask the mon for a newer OSD map only on their objecter
# tick (default every 5 s). On a (re)start radosgw usually comes up before the OSD has booted, its
# first read waits for the map that shows the OSD up: a 1 s tick saves ~2-4 s of every start.
objecter_tick_interval = 1

[$RGW_NAME]
# Beast frontend, loopback only.
rgw_frontends = beast endpoint=127.0.0.1:$PORT
rgw_data = $DIR/rgw
# Garbage-collect deleted/overwritten tail objects after 30 s, not 2 h, so disk use follows deletes.
rgw_gc_obj_min_wait = 30
rgw_gc_processor_period = 30
rgw_enable_usage_log = false
# No lifecycle (LC) worker threads. Between 00:00 and 06:00 UTC (rgw_lifecycle_work_time) they
# start processing right after radosgw starts, and a TERM then waits for them (seconds); the
# SIGALRM safety net (rgw_exit_timeout_secs) then kills radosgw without unwatching, which makes
# the next start's create_bucket hang (see osd_client_watch_timeout). Lifecycle *configuration*
# (Put/GetBucketLifecycleConfiguration) still works; rules are just never executed (on AWS they
# run about once a day, so no test can wait for them anyway).
rgw_enable_lc_threads = false
# On TERM radosgw waits up to this long for in-flight requests before it is killed by an alarm
# (default 120 s); a test cluster being torn down does not need two minutes.
rgw_exit_timeout_secs = 10
# No dynamic resharding churn in tests.
rgw_dynamic_resharding = false
EOF
}

# ---------------------------------------------------------------------------------------------
# cluster creation (first start only)
# ---------------------------------------------------------------------------------------------
create_cluster() {
    log "creating a new one-node cluster in $DIR"
    # Leftover daemons from a failed earlier attempt would hold files we are about to wipe.
    [ -d "$RUN_DIR" ] && cmd_stop
    # A previous half-finished creation (no READY_MARK) is not trusted: start from scratch.
    rm -rf "$DIR/mon" "$DIR/osd" "$DIR/rgw" "$RUN_DIR" "$LOG_DIR" "$CONF" "$DIR/monmap"
    mkdir -p "$DIR/mon" "$DIR/osd" "$DIR/rgw" "$RUN_DIR" "$LOG_DIR"

    local fsid osd_uuid
    fsid=$(cat /proc/sys/kernel/random/uuid)
    osd_uuid=$(cat /proc/sys/kernel/random/uuid)
    write_conf "$fsid"

    # Monitor: monmap with one msgr2 address, then mkfs. No keyring needed with auth none.
    monmaptool --create --fsid "$fsid" --addv "$MON_ID" "[v2:127.0.0.1:$MON_PORT]" \
        "$DIR/monmap" >"$LOG_DIR/mkfs.out" 2>&1 || { dump_logs; die "monmaptool failed"; }
    mkdir -p "$DIR/mon/ceph-$MON_ID"
    ceph-mon -c "$CONF" --mkfs -i "$MON_ID" --monmap "$DIR/monmap" \
        >>"$LOG_DIR/mkfs.out" 2>&1 || { dump_logs; die "ceph-mon --mkfs failed"; }
    start_mon

    # OSD: register it with the mon (allocates id 0), then mkfs (creates the sparse block file).
    local id
    id=$(ceph_cli osd new "$osd_uuid" 2>>"$LOG_DIR/mkfs.out") || { dump_logs; die "ceph osd new failed"; }
    [ "$id" = "$OSD_ID" ] || die "expected osd id $OSD_ID, got '$id'"
    mkdir -p "$DIR/osd/ceph-$OSD_ID"
    ceph-osd -c "$CONF" -i "$OSD_ID" --mkfs --osd-uuid "$osd_uuid" \
        >>"$LOG_DIR/mkfs.out" 2>&1 || { dump_logs; die "ceph-osd --mkfs failed"; }

    echo "$fsid $MON_PORT" >"$READY_MARK"
}

# Is something already listening on 127.0.0.1:$1? (bash's /dev/tcp; refused at once when free)
port_busy() {
    timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null
}

start_mon() {
    daemon_alive mon ceph-mon && return 0
    # A port taken by ANOTHER cluster's mon is dangerous, not just a bind error: our ceph.conf
    # points at 127.0.0.1:$MON_PORT, so the CLI calls below would silently talk to that cluster
    # (seen here: `ceph osd new` registered OSDs in the other cluster). Refuse instead.
    if port_busy "$MON_PORT"; then
        die "port $MON_PORT is already in use (another Ceph monitor?); pick another HUB_RGW_MON_PORT"
    fi
    spawn mon ceph-mon -c "$CONF" -i "$MON_ID"
    # Wait until the mon answers a command (quorum of one), so later CLI calls do not hang.
    local deadline=$((SECONDS + 30)) fsid
    until fsid=$(ceph_cli --connect-timeout 5 fsid 2>/dev/null); do
        daemon_alive mon ceph-mon || { dump_logs; die "ceph-mon exited during start"; }
        ((SECONDS < deadline)) || { dump_logs; die "ceph-mon did not answer within 30 s"; }
        sleep 0.2
    done
    # Belt and braces: the mon that answered must be ours.
    [ "$fsid" = "$(awk '/^fsid =/ {print $3}' "$CONF")" ] ||
        die "the monitor on port $MON_PORT belongs to another cluster (fsid $fsid)"
}

start_osd() {
    daemon_alive osd ceph-osd && return 0
    spawn osd ceph-osd -c "$CONF" -i "$OSD_ID"
}

start_rgw() {
    daemon_alive rgw radosgw && return 0
    # Someone else's S3 server on this port would make the readiness check (and the tests) talk
    # to it instead of us; radosgw itself would only log a bind error and keep retrying.
    if port_busy "$PORT"; then
        die "port $PORT is already in use; stop whatever listens there or set HUB_RGW_PORT"
    fi
    spawn rgw radosgw -c "$CONF" -n "$RGW_NAME"
}

# The S3 user with fixed keys. Idempotent: `user info` first, create only if missing; a marker file
# skips even that on restarts (each radosgw-admin run costs a RADOS connection, ~0.5 s).
# radosgw-admin talks to RADOS directly, so it only needs mon+osd (it blocks until the OSD is up).
ensure_user() {
    [ -f "$DIR/user.created" ] && return 0
    if ! rgw_admin user info --uid="$ACCESS_KEY" >/dev/null 2>&1; then
        rgw_admin user create --uid="$ACCESS_KEY" --display-name="hub tests" \
            --access-key="$ACCESS_KEY" --secret-key="$SECRET_KEY" >/dev/null 2>>"$LOG_DIR/admin.out" ||
            { dump_logs; die "radosgw-admin user create failed"; }
    fi
    touch "$DIR/user.created"
}

# Readiness = one real authenticated S3 call (ListBuckets with the test user's keys) succeeds.
# With boto3 available that is done in ONE python process polling for up to $1 seconds (importing
# boto3 per attempt would cost ~0.4 s each); without boto3, an anonymous GET / with curl (RGW answers
# 200 with an empty bucket list once it serves requests). Returns non-zero if not ready in time.
s3_ready() {
    local within=${1:-0}
    if python3 -c 'import boto3' >/dev/null 2>&1; then
        python3 - "$ENDPOINT" "$ACCESS_KEY" "$SECRET_KEY" "$REGION" "$within" >/dev/null 2>&1 <<'PY'
import sys, time, boto3
from botocore.config import Config
ep, ak, sk, region, within = sys.argv[1:6]
deadline = time.monotonic() + float(within)
s3 = boto3.client("s3", endpoint_url=ep, aws_access_key_id=ak, aws_secret_access_key=sk,
                  region_name=region,
                  config=Config(signature_version="s3v4", s3={"addressing_style": "path"},
                                connect_timeout=2, read_timeout=5, retries={"max_attempts": 1}))
while True:
    try:
        s3.list_buckets()
        sys.exit(0)
    except Exception:
        if time.monotonic() >= deadline:
            sys.exit(1)
        time.sleep(0.2)
PY
    else
        local deadline=$((SECONDS + within))
        until [ "$(curl -s -o /dev/null -m 5 -w '%{http_code}' "$ENDPOINT/")" = 200 ]; do
            ((SECONDS < deadline)) || return 1
            sleep 0.2
        done
    fi
}

wait_s3() {
    local deadline=$((SECONDS + TIMEOUT))
    # Poll in 5 s slices so a crashed daemon is reported at once instead of after the full timeout.
    until s3_ready 5; do
        local d
        for d in "mon ceph-mon" "osd ceph-osd" "rgw radosgw"; do
            # shellcheck disable=SC2086
            daemon_alive $d || { dump_logs; die "${d%% *} daemon died while waiting for S3"; }
        done
        ((SECONDS < deadline)) || { dump_logs; die "S3 at $ENDPOINT not ready after ${TIMEOUT}s"; }
    done
}

all_alive() {
    daemon_alive mon ceph-mon && daemon_alive osd ceph-osd && daemon_alive rgw radosgw
}

# ---------------------------------------------------------------------------------------------
# subcommands
# ---------------------------------------------------------------------------------------------
cmd_start() {
    cmd_install
    local t0=$SECONDS fsid="" mon_port=""
    mkdir -p "$DIR"
    # Fast path: already running and answering -> nothing to do.
    if [ -f "$READY_MARK" ] && all_alive && s3_ready; then
        log "already running at $ENDPOINT"
        return 0
    fi
    if [ -f "$READY_MARK" ]; then
        read -r fsid mon_port <"$READY_MARK"
        if [ -n "$mon_port" ] && [ "$mon_port" != "$MON_PORT" ]; then
            log "note: this cluster's monitor was created on port $mon_port; keeping it"
            MON_PORT=$mon_port
        fi
    fi
    # Fail before touching anything if a port we still have to bind is taken (start_mon/start_rgw
    # check again, this is just the early, cheap refusal).
    if ! daemon_alive mon ceph-mon && port_busy "$MON_PORT"; then
        die "port $MON_PORT is already in use (another Ceph monitor?); pick another HUB_RGW_MON_PORT"
    fi
    if ! daemon_alive rgw radosgw && port_busy "$PORT"; then
        die "port $PORT is already in use; stop whatever listens there or set HUB_RGW_PORT"
    fi
    if [ -n "$fsid" ]; then
        # Existing cluster: regenerate ceph.conf (RGW port/settings may have changed; same fsid),
        # then (re)start whatever is not running. Never mkfs again.
        mkdir -p "$RUN_DIR" "$LOG_DIR"
        write_conf "$fsid"
        log "starting existing cluster in $DIR"
        start_mon
    else
        create_cluster      # also starts the mon
    fi
    start_osd
    start_rgw
    ensure_user
    wait_s3
    log "S3 ready at $ENDPOINT after $((SECONDS - t0)) s (logs: $LOG_DIR)"
}

cmd_stop() {
    # Strictly one after the other (~3 + 2 + 2 s), in reverse dependency order:
    #  - radosgw first: its shutdown still talks to RADOS (watch/notify teardown); with the OSD
    #    already gone it ignores TERM indefinitely (seen here: KILL after the full timeout);
    #  - the OSD next: it tells the mon it is going down and would wait osd_mon_shutdown_timeout
    #    (5 s) if the mon were already gone;
    #  - the mon last.
    stop_daemon rgw radosgw 15
    stop_daemon osd ceph-osd 20
    stop_daemon mon ceph-mon 10
}

cmd_destroy() {
    cmd_stop
    rm -rf "$DIR"
}

cmd_status() {
    local rc=0 d
    for d in "mon ceph-mon" "osd ceph-osd" "rgw radosgw"; do
        # shellcheck disable=SC2086
        if daemon_alive $d; then
            echo "${d%% *}: running (pid $(cat "$(pidfile "${d%% *}")"))"
        else
            echo "${d%% *}: stopped"; rc=1
        fi
    done
    return $rc
}

cmd_env() {
    cat <<EOF
export AWS_ENDPOINT_URL=$ENDPOINT
export AWS_ACCESS_KEY_ID=$ACCESS_KEY
export AWS_SECRET_ACCESS_KEY=$SECRET_KEY
export AWS_DEFAULT_REGION=$REGION
EOF
}

# Deleted objects' data goes to RGW's garbage collector (rgw_gc_obj_min_wait above), which removes it
# later, in the background, on the same cores: `gc` does it now, and returns when it is done.
cmd_gc() {
    rgw_admin gc process --include-all >/dev/null
}

# Serialize start/stop/destroy so two test processes calling `start` at once do not both mkfs.
with_lock() {
    if command -v flock >/dev/null 2>&1; then
        mkdir -p "$(dirname "$DIR")"
        exec 9>"$DIR.lock"
        flock -w 300 9 || die "could not lock $DIR.lock"
    fi
    "$@"
}

case "${1:-}" in
    install) with_lock cmd_install ;;
    start)   with_lock cmd_start ;;
    stop)    with_lock cmd_stop ;;
    destroy) with_lock cmd_destroy ;;
    status)  cmd_status ;;
    env)     cmd_env ;;
    gc)      cmd_gc ;;
    *)
        sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//' >&2
        exit 2
        ;;
esac
