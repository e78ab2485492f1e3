# Shared by scripts/conformance.sh and scripts/clients/run.sh (sourced, not run).

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
