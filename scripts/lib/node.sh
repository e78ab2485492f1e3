# Shared by scripts/conformance.sh and scripts/clients/run.sh (sourced, not run). The caller
# defines say and die, and sets NODE_DIR and INSTALL_TIMEOUT.

# "22.23.5" >= "22.19"? Numeric major.minor comparison, no sort -V needed.
version_at_least() {
  local have_major have_minor want_major want_minor
  IFS=. read -r have_major have_minor _ <<<"$1"
  IFS=. read -r want_major want_minor _ <<<"$2"
  ((have_major > want_major || (have_major == want_major && have_minor >= want_minor)))
}

installed_version() {  # the version in a package.json, or nothing
  [[ -f $1 ]] && sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$1" | head -n 1
}

# npm_install NODE PACKAGE@VERSION...: install into $NODE_DIR, saved exact into its package.json,
# so that a later install (by this script or the other one) keeps what an earlier one added.
# NODE runs the one-off seeding below (any Node will do).
npm_install() {
  local node=$1
  shift
  command -v npm >/dev/null || die "npm not found: install Node.js (npm) first"
  mkdir -p "$NODE_DIR"
  local modules=$NODE_DIR/node_modules
  if [[ ! -f $NODE_DIR/package.json && -f $modules/.package-lock.json ]]; then
    # npm prunes whatever its package.json does not list: seed one with the packages already
    # installed at the top (no other package depends on them), so nobody's install is removed.
    "$node" -e '
      const fs = require("fs"), lock = JSON.parse(fs.readFileSync(process.argv[1])).packages;
      const used = new Set();
      for (const p of Object.values(lock))
        for (const k of ["dependencies", "optionalDependencies", "peerDependencies"])
          Object.keys(p[k] ?? {}).forEach((n) => used.add(n));
      const deps = {};
      for (const [path, p] of Object.entries(lock)) {
        const name = path.replace(/^node_modules\//, "");
        if (name && !name.includes("node_modules/") && !used.has(name) && !p.extraneous) deps[name] = p.version;
      }
      fs.writeFileSync(process.argv[2], JSON.stringify({ dependencies: deps }, null, 2) + "\n");
    ' "$modules/.package-lock.json" "$NODE_DIR/package.json" ||
      die "could not list what $NODE_DIR already holds; not installing over it"
  fi
  say "installing $* into $NODE_DIR"
  timeout "$INSTALL_TIMEOUT" npm install --prefix "$NODE_DIR" --save-exact --no-audit --no-fund \
    --loglevel=error "$@" >&2 || die "npm install $* failed (or took over ${INSTALL_TIMEOUT}s)"
}
