# Shared by scripts/run and scripts/test. Sourced, not run.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# Debian packages the build, the tests and the benchmarks need.
DSH_APT_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git
  libboost-dev nlohmann-json3-dev libsqlite3-dev libhowardhinnant-date-dev tzdata
  libcli11-dev libspdlog-dev libfmt-dev libcurl4-openssl-dev libyaml-cpp-dev
  libgtest-dev libgmock-dev libbenchmark-dev libjemalloc-dev libpq-dev
  bubblewrap ripgrep libxml2-dev libssl-dev
  curl python3 python3-croniter python3-prometheus-client json-schema-test-suite
)

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

# Installs what is missing (DSH_APT_PACKAGES and the packages given as
# arguments); runs apt-get update at most once, and only when something is
# missing, so a second run is quick and offline. Then `npm ci` when
# package-lock.json is newer than node_modules (the web UI's build and tests).
install_deps() {
  local missing=()
  for p in "${DSH_APT_PACKAGES[@]}" "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed' || missing+=("$p")
  done
  # Node may come from outside Debian (the machine image ships its own); only
  # install Debian's when there is none, since the two conflict.
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then missing+=(nodejs npm); fi
  if [ ${#missing[@]} -gt 0 ]; then
    echo "==> installing: ${missing[*]}"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
  if [ -f "$ROOT/package.json" ] && [ ! -f "$ROOT/node_modules/.package-lock.json" -o "$ROOT/package-lock.json" -nt "$ROOT/node_modules/.package-lock.json" ]; then
    echo "==> npm ci"
    (cd "$ROOT" && npm ci --no-audit --no-fund)
  fi
}

# configure_and_build DIR [cmake args...]   (BUILD_TARGET=name builds one target)
configure_and_build() {
  local dir="$1"; shift
  export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/dsh-ccache}"
  # Paths relative to the checkout, and the build directory out of the hash,
  # so that a fresh clone elsewhere (CI) reuses what another clone compiled.
  export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=1
  # Without this, ccache refuses every compilation that includes a
  # precompiled header (CMake's -include cmake_pch.hxx): about 43% of them
  # ("uncacheable" in ccache -s). The code uses no __DATE__ or __TIME__.
  export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros}"
  # Both trees (normal and ASan) fit in this; the cap keeps a full disk away.
  export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-3G}"
  cmake -S "$ROOT" -B "$ROOT/$dir" -G Ninja "$@" >/dev/null
  cmake --build "$ROOT/$dir" ${BUILD_TARGET:+--target "$BUILD_TARGET"}
}
