#!/usr/bin/env bash
# The memlane image's entrypoint (deploy/Containerfile): makes the node on first start, then
# runs `memlane serve` in its place (exec, so SIGTERM from the runtime reaches the node).
#
#   serve [FLAG …]   (the default command) make the node if there is none, then serve
#   anything else   run `memlane …` on the node, e.g. `mesh invite --label laptop`
#
# The node is $MEMLANE_DATA (default /data/memlane, inside the /data volume). Made once:
#
#   MEMLANE_ROLE=authority   memlane init: a new mesh whose authority is this node
#   MEMLANE_ROLE=member      memlane init --join $MEMLANE_INVITE --authority $MEMLANE_AUTHORITY
#                            (the authority's join port, HOST:PORT); the join is retried for
#                            MEMLANE_JOIN_WAIT seconds (default 60) while the authority starts
#
# Once the node exists neither the role nor the invite is needed again (an invite is valid
# once). Serving, memlane reads its own variables (docs/operations.md §Configure):
# MEMLANE_SYNC_LISTEN (e.g. 0.0.0.0:7411), MEMLANE_PEERS (comma-separated HOST:PORT),
# MEMLANE_MCP_HTTP, MEMLANE_HEALTH, MEMLANE_DISCOVERY (on/off) and MEMLANE_CONFIG. One more is
# the entrypoint's:
#
#   MEMLANE_JOIN_LISTEN  --join-listen: on the authority, while nodes are expected to join
set -euo pipefail

MEMLANE=${MEMLANE:-memlane}
DATA=${MEMLANE_DATA:-${XDG_DATA_HOME:-/data}/memlane}
export MEMLANE_DATA=$DATA # every memlane command's default --data

fail() {
    printf 'container-entrypoint: %s\n' "$*" >&2
    exit 1
}

make_node() {
    case ${MEMLANE_ROLE:-} in
    authority)
        "$MEMLANE" init --data "$DATA" >&2 # stdout is serve's (its address, with --json)
        ;;
    member)
        [[ -n ${MEMLANE_INVITE:-} && -n ${MEMLANE_AUTHORITY:-} ]] ||
            fail "no node in $DATA yet: a member joins with MEMLANE_INVITE (memlane mesh" \
                "invite on the authority) and MEMLANE_AUTHORITY (its join port, HOST:PORT)"
        local deadline=$((SECONDS + ${MEMLANE_JOIN_WAIT:-60}))
        until "$MEMLANE" init --data "$DATA" --join "$MEMLANE_INVITE" \
            --authority "$MEMLANE_AUTHORITY" >&2; do
            ((SECONDS < deadline)) || fail "could not join through $MEMLANE_AUTHORITY"
            sleep 2
        done
        ;;
    *)
        fail "no node in $DATA yet: set MEMLANE_ROLE to authority (a new mesh) or member" \
            "(join one by invite)"
        ;;
    esac
}

if [[ $# -gt 0 && $1 != serve && $1 != -* ]]; then
    exec "$MEMLANE" "$@"
fi
[[ ${1:-} == serve ]] && shift

[[ -f $DATA/node.key ]] || make_node

flags=()
[[ -n ${MEMLANE_JOIN_LISTEN:-} ]] && flags+=(--join-listen "$MEMLANE_JOIN_LISTEN")
exec "$MEMLANE" serve "${flags[@]}" "$@"
