#!/usr/bin/env bash
# Three memlane nodes on this machine, on loopback: a mesh formed by invite, synced, stopped.
#
#   a  the mesh authority (memlane init), serving sync and joins
#   b  joins by invite (memlane init --join … --authority …), dials a
#   c  joins by invite, dials a and b
#
# (with DISCOVERY=on, no one is told whom to dial: they find each other by zeroconf).
#
# Each node has its own data directory under a temporary directory and its own ports. SRs
# are written on a; the script waits until b and c hold the same log as a (the entry and log
# counts of `memlane log verify`) and c reads the SRs, then stops every node with SIGTERM.
# Exit 0 once converged and stopped; non-zero, with the reason, otherwise.
#
# Environment:
#   MEMLANE    the memlane command (default: memlane on PATH; e.g. .venv/bin/memlane)
#   TIMEOUT    seconds to wait for a node to start or for the mesh to converge (default 30)
#   PORT_BASE  first of twelve fixed ports (a: sync, join, MCP, health; then b; then c);
#              unset or 0: every port is picked free by the system and read from what serve
#              prints
#   ENTRIES    how many SRs to write on a (default 3)
#   KEEP       1: keep the data directories and logs (their path is printed)
#   DISCOVERY  off (default): static peers; on: zeroconf on loopback, no static peers
#
# docs/operations.md describes running nodes for real; docs/mesh.md the mesh and joining.
set -euo pipefail

MEMLANE=${MEMLANE:-memlane}
TIMEOUT=${TIMEOUT:-30}
PORT_BASE=${PORT_BASE:-0}
ENTRIES=${ENTRIES:-3}
KEEP=${KEEP:-0}

# --- Discovery -----------------------------------------------------------------------------
# off: the nodes find each other through static peers (--peer), b dialling a, c dialling a and
# b. on: no static peers; zeroconf on loopback only (each node's config.toml says so) and the
# nodes must find each other (`memlane serve --discovery on`).
DISCOVERY=${DISCOVERY:-off}
DISCOVERY_CONFIG='[discovery]
interfaces = ["127.0.0.1"]'
# -------------------------------------------------------------------------------------------

# The nodes' settings are the flags below and nothing of this shell's (MEMLANE_CONFIG,
# MEMLANE_PEERS …).
for variable in "${!MEMLANE_@}"; do unset "$variable"; done

ROOT=$(mktemp -d "${TMPDIR:-/tmp}/memlane-local-mesh.XXXXXX")
declare -A PID=() SYNC=()
NODES=(a b c)

say() { printf 'local-mesh: %s\n' "$*"; }
fail() {
    printf 'local-mesh: FAILED: %s\n' "$*" >&2
    exit 1
}

stop_node() { # name → SIGTERM, wait, report its exit code
    local name=$1 pid=${PID[$1]:-} code=0
    [[ -n $pid ]] || return 0
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" || code=$?
    unset "PID[$name]"
    return "$code"
}

cleanup() {
    local code=$? name
    trap - EXIT INT TERM
    for name in "${NODES[@]}"; do
        stop_node "$name" 2>/dev/null || true
    done
    if [[ $KEEP == 1 || $code != 0 ]]; then
        say "data directories and logs kept in $ROOT"
    else
        rm -rf "$ROOT"
    fi
    exit "$code"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'say "command failed (line $LINENO): $BASH_COMMAND" >&2' ERR

port() { # node index (0, 1, 2), offset (0 sync, 1 join, 2 MCP, 3 health) → port
    if [[ $PORT_BASE == 0 ]]; then echo 0; else echo $((PORT_BASE + 4 * $1 + $2)); fi
}

printed() { # name, prefix → the rest of the line serve printed after prefix, or nothing
    sed -n "s/^$2 //p" "$ROOT/logs/$1.out" | head -n 1
}

start() { # name, index, serve flags … → waits until the node syncs; sets PID and SYNC
    local name=$1 index=$2 deadline=$((SECONDS + TIMEOUT))
    shift 2
    : >"$ROOT/logs/$name.out"
    "$MEMLANE" serve --data "$ROOT/$name" --discovery "$DISCOVERY" \
        --sync-listen "127.0.0.1:$(port "$index" 0)" \
        --mcp-http "127.0.0.1:$(port "$index" 2)" \
        --health-listen "127.0.0.1:$(port "$index" 3)" "$@" \
        >"$ROOT/logs/$name.out" 2>"$ROOT/logs/$name.err" &
    PID[$name]=$!
    until [[ -n $(printed "$name" "syncing at") ]]; do
        if ! kill -0 "${PID[$name]}" 2>/dev/null; then
            unset "PID[$name]"
            tail -n 20 "$ROOT/logs/$name.err" >&2
            fail "node $name did not start"
        fi
        ((SECONDS < deadline)) || fail "node $name did not start within $TIMEOUT s"
        sleep 0.1
    done
    SYNC[$name]=$(printed "$name" "syncing at")
    local health
    health=$(printed "$name" "health and metrics at")
    say "node $name serving: sync at ${SYNC[$name]}, MCP at $(printed "$name" "serving MCP at")," \
        "health at ${health%%,*}"
}

peers_of() { # addresses → --peer flags, none with discovery on
    [[ $DISCOVERY == on ]] && return 0
    local address
    for address in "$@"; do printf -- '--peer\n%s\n' "$address"; done
}

configure() { # name → its config.toml, once the node is made
    if [[ $DISCOVERY == on ]]; then printf '%s\n' "$DISCOVERY_CONFIG" >"$ROOT/$1/config.toml"; fi
}

counts() { # name → "N entries in M logs"
    "$MEMLANE" log verify --data "$ROOT/$1" | sed -n 's/^ok: //p'
}

mkdir -p "$ROOT/logs"
say "nodes in $ROOT, memlane: $MEMLANE, discovery: $DISCOVERY"

# 1. a: a new node, the authority of a new mesh, serving sync and joins.
"$MEMLANE" init --data "$ROOT/a" >/dev/null
configure a
start a 0 --join-listen "127.0.0.1:$(port 0 1)"
JOIN_AT=$(printed a "accepting joins at")
say "node a is the authority; it accepts joins at $JOIN_AT"

# 2. b and c: each redeems an invite of its own (single use) with the authority.
for name in b c; do
    invite=$("$MEMLANE" mesh invite --data "$ROOT/a" --label "$name" --expires 30m)
    "$MEMLANE" init --data "$ROOT/$name" --join "$invite" --authority "$JOIN_AT" >/dev/null
    configure "$name"
    say "node $name joined the mesh by invite"
done
mapfile -t flags < <(peers_of "${SYNC[a]}")
start b 1 "${flags[@]}"
mapfile -t flags < <(peers_of "${SYNC[a]}" "${SYNC[b]}")
start c 2 "${flags[@]}"

# 3. SRs written on a, by a token of a's.
WRITER=$("$MEMLANE" token create --data "$ROOT/a" --principal alice --workspace team \
    --scope read:workspace --scope write:workspace)
for i in $(seq 1 "$ENTRIES"); do
    MEMLANE_TOKEN=$WRITER "$MEMLANE" write --data "$ROOT/a" --title "local mesh note $i" \
        --text "written on node a" --tags local-mesh >/dev/null
done
say "wrote $ENTRIES SRs on node a: $(counts a)"

# 4. Converged: b and c hold what a holds, and a reader on c finds every SR.
deadline=$((SECONDS + TIMEOUT))
while :; do
    want=$(counts a)
    have_b=$(counts b)
    have_c=$(counts c)
    [[ $have_b == "$want" && $have_c == "$want" ]] && break
    ((SECONDS < deadline)) ||
        fail "no convergence within $TIMEOUT s: a has $want, b $have_b, c $have_c"
    sleep 0.5
done
READER=$("$MEMLANE" token create --data "$ROOT/c" --principal bob --workspace team \
    --scope read:workspace)
listed=$(MEMLANE_TOKEN=$READER "$MEMLANE" timeline list --data "$ROOT/c" --page-size 100)
found=$(grep -c "local mesh note" <<<"$listed" || true)
[[ $found == "$ENTRIES" ]] || fail "node c reads $found of the $ENTRIES SRs written on a"
say "converged: a, b and c each hold $want; node c reads the $ENTRIES SRs written on a"
"$MEMLANE" peers --data "$ROOT/a"

# 5. SIGTERM: each node says bye to its peers, closes its store and exits 0.
for name in c b a; do
    code=0
    stop_node "$name" || code=$?
    [[ $code == 0 ]] || fail "node $name exited $code on SIGTERM: $(tail -n 5 "$ROOT/logs/$name.err")"
    say "node $name stopped"
done
say "done"
