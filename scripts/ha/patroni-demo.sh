#!/usr/bin/env bash
# A two-member PostgreSQL cluster under Patroni, with a one-node etcd, on 127.0.0.1.
#
#   scripts/ha/patroni-demo.sh start DIR   # etcd + members m1 and m2, database "hailq"
#   scripts/ha/patroni-demo.sh url DIR     # the multi-host URL for hailq
#   scripts/ha/patroni-demo.sh status DIR  # patronictl list
#   scripts/ha/patroni-demo.sh kill-leader DIR  # SIGKILL the leader's Patroni and PostgreSQL
#   scripts/ha/patroni-demo.sh stop DIR    # stop everything (DIR stays)
#
# Ports come from the environment: ETCD_PORT (23790), ETCD_PEER_PORT (23800),
# PG_PORT_1 (54331), PG_PORT_2 (54332), API_PORT_1 (8011), API_PORT_2 (8012).
# SYNC_MODE=false gives asynchronous replication. Run as root, the servers run as the
# postgres OS user (through setpriv and runuser, both in util-linux). Needs Debian's
# patroni and etcd-server packages.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
cmd="${1:?usage: $0 start|url|status|kill-leader|stop DIR}"
DIR="$(mkdir -p "${2:?usage: $0 $cmd DIR}" && cd "$2" && pwd)"
export DIR
export ETCD_PORT="${ETCD_PORT:-23790}" ETCD_PEER_PORT="${ETCD_PEER_PORT:-23800}"
export PG_BIN="${PG_BIN:-$(pg_config --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)}"
export SYNC_MODE="${SYNC_MODE:-true}"
PG_PORT_1="${PG_PORT_1:-54331}" PG_PORT_2="${PG_PORT_2:-54332}"
API_PORT_1="${API_PORT_1:-8011}" API_PORT_2="${API_PORT_2:-8012}"

as_postgres() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

start_bg() {  # NAME COMMAND...: in the background, in a session of its own, pid in DIR
    local name="$1"; shift
    local become=()  # setpriv execs (runuser would stay as the parent): $! is the process
    [ "$(id -u)" != 0 ] || become=(setpriv --reuid=postgres --regid=postgres --init-groups
                                   env HOME="$DIR")
    setsid "${become[@]}" "$@" >"$DIR/$name.log" 2>&1 < /dev/null &
    echo $! >"$DIR/$name.pid"
}

member_config() {  # NAME PG_PORT API_PORT: member.yml with its ${...} filled in
    sed -e "s|\${NAME}|$1|g" -e "s|\${PG_PORT}|$2|g" -e "s|\${API_PORT}|$3|g" \
        -e "s|\${ETCD_PORT}|$ETCD_PORT|g" -e "s|\${SYNC_MODE}|$SYNC_MODE|g" \
        -e "s|\${DIR}|$DIR|g" -e "s|\${PG_BIN}|$PG_BIN|g" "$HERE/member.yml" >"$DIR/$1.yml"
    if grep -q '\${' "$DIR/$1.yml"; then echo "unfilled value in $DIR/$1.yml"; exit 1; fi
}

patronictl_() { as_postgres patronictl -c "$DIR/m1.yml" "$@"; }

leader_port() {  # the port of the member whose PostgreSQL accepts writes, if any
    local port
    for port in "$PG_PORT_1" "$PG_PORT_2"; do
        if [ "$(as_postgres psql -h 127.0.0.1 -p "$port" -U postgres -d postgres -tAc \
                'SELECT NOT pg_is_in_recovery()' 2>/dev/null)" = t ]; then
            echo "$port"; return 0
        fi
    done
    return 1
}

diagnose() {  # LEADER_PORT: what an operator would look at first, for a failed start
    as_postgres psql -h 127.0.0.1 -p "$1" -U postgres -d postgres -c \
        "SELECT application_name, state, sync_state FROM pg_stat_replication" 2>&1 || true
    patronictl_ list 2>&1 || true
    for name in m1 m2; do
        if kill -0 "$(cat "$DIR/$name.pid")" 2>/dev/null; then echo "== $name: running"
        else echo "== $name: its Patroni exited"; fi
        tail -n 25 "$DIR/$name.log"
    done
}

case "$cmd" in
start)
    [ "$(id -u)" != 0 ] || chown postgres:postgres "$DIR"
    chmod 700 "$DIR"
    start_bg etcd etcd --name hailq-demo --data-dir "$DIR/etcd" \
        --listen-client-urls "http://127.0.0.1:$ETCD_PORT" \
        --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
        --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
        --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
        --initial-cluster "hailq-demo=http://127.0.0.1:$ETCD_PEER_PORT"
    for _ in $(seq 100); do  # until etcd listens
        (exec 3<>"/dev/tcp/127.0.0.1/$ETCD_PORT") 2>/dev/null && break; sleep 0.2
    done
    member_config m1 "$PG_PORT_1" "$API_PORT_1"
    member_config m2 "$PG_PORT_2" "$API_PORT_2"
    start_bg m1 patroni "$DIR/m1.yml"
    # The second member clones the first once it leads (pg_basebackup under Patroni).
    for _ in $(seq 300); do leader_port >/dev/null && break; sleep 0.2; done
    leader="$(leader_port)" || { echo "no leader after 60 s:"; tail -n 25 "$DIR/m1.log"; exit 1; }
    start_bg m2 patroni "$DIR/m2.yml"
    as_postgres psql -h 127.0.0.1 -p "$leader" -U postgres -d postgres -qc \
        "SELECT 1" >/dev/null
    as_postgres psql -h 127.0.0.1 -p "$leader" -U postgres -d postgres -tAc \
        "SELECT 1 FROM pg_database WHERE datname = 'hailq'" | grep -q 1 ||
        as_postgres psql -h 127.0.0.1 -p "$leader" -U postgres -d postgres -qc \
            "CREATE DATABASE hailq"
    want=streaming
    for _ in $(seq 600); do
        n="$(as_postgres psql -h 127.0.0.1 -p "$leader" -U postgres -d postgres -tAc \
            "SELECT count(*) FROM pg_stat_replication WHERE state = '$want'
             AND application_name <> 'pg_basebackup'")"
        [ "$n" = 1 ] && break; sleep 0.2
    done
    if [ "$n" != 1 ]; then
        echo "the second member does not stream after 120 s; see $DIR/m2.log"
        diagnose "$leader"; exit 1
    fi
    patronictl_ list
    ;;
url)
    echo "postgresql://postgres@127.0.0.1:$PG_PORT_1,127.0.0.1:$PG_PORT_2/hailq?target_session_attrs=read-write"
    ;;
status)
    patronictl_ list
    ;;
kill-leader)
    leader="$(leader_port)" || { echo "no leader"; exit 1; }
    member=m1; [ "$leader" = "$PG_PORT_1" ] || member=m2
    postmaster="$(head -1 "$DIR/$member/postmaster.pid")"
    # Patroni first (it would restart PostgreSQL), then PostgreSQL and its children.
    # shellcheck disable=SC2046
    kill -KILL "$(cat "$DIR/$member.pid")" "$postmaster" $(pgrep -P "$postmaster") 2>/dev/null || true
    echo "$member"
    ;;
stop)
    for name in m1 m2 etcd; do
        [ -f "$DIR/$name.pid" ] || continue
        pid="$(cat "$DIR/$name.pid")"
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
        kill -KILL "$pid" 2>/dev/null || true
        rm -f "$DIR/$name.pid"
    done
    for member in m1 m2; do  # a PostgreSQL left behind by a killed Patroni
        [ -f "$DIR/$member/postmaster.pid" ] || continue
        as_postgres "$PG_BIN/pg_ctl" -D "$DIR/$member" stop -m immediate >/dev/null 2>&1 || true
    done
    ;;
*)
    echo "usage: $0 start|url|status|kill-leader|stop DIR"; exit 2
    ;;
esac
