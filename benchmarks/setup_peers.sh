#!/usr/bin/env bash
# Idempotent set-up of the peer IK solvers for the side-by-side benchmark
# (benchmarks/bench_peers.py). The project itself never depends on
# them: they are not in requirements/*.txt.
#
#   KDL   Debian package python3-pykdl (apt, needs root). It installs PyKDL for
#         Debian's /usr/bin/python3.11; the .venv interpreter is also CPython 3.11
#         (same extension ABI), so a folder holding ONLY a symlink to PyKDL's
#         extension module is put on the venv's path with a .pth file. Nothing
#         else of Debian's dist-packages (its numpy, ...) becomes visible.
#   roboticstoolbox-python, ikpy   from PyPI into .venv, versions pinned below,
#         with requirements/*.txt as pip constraints so that no project pin
#         (numpy, scipy, matplotlib, ...) can move.
#
# A peer that cannot be installed is reported and skipped (exit status 0); the
# benchmark then prints the reason and still runs the project's own figures.
# Environment: VENV (default <repo>/.venv; created by scripts/bootstrap.sh).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
VPY="$VENV/bin/python"
STAMPS="$VENV/.bootstrap"

say() { printf '[setup_peers] %s\n' "$*"; }

# Versions resolved together with numpy 2.4.6 / scipy 1.17.1 / matplotlib 3.11.2
# on CPython 3.11 (pip --dry-run --report); roboticstoolbox 1.5.0 ships a cp311
# wheel built against numpy 2.
PEER_PINS=(
  roboticstoolbox-python==1.5.0
  ikpy==4.2.1
  spatialmath-python==1.1.18
  spatialgeometry==1.4.2
  pgraph-python==1.0.0
  rtb-data==2.0.0
  ansitable==1.2.0
  colored==2.3.2
  progress==1.6.1
  robot_descriptions==2.0.0
  xacrodoc==2.0.1
  sympy==1.14.0
  mpmath==1.3.0
  # transitive (robot_descriptions, xacrodoc, spatialmath-python)
  GitPython==3.2.1
  gitdb==4.0.12
  smmap==5.0.3
  tqdm==4.70.1
  rospkg==1.6.3
  xacro==2.1.1
  distro==1.9.0
  typing_extensions==4.16.0
  pre_commit==4.7.0
  cfgv==3.5.0
  identify==2.6.20
  nodeenv==1.12.0
  virtualenv==21.15.11
  filelock==4.3.1
  platformdirs==4.14.8
  python-discovery==1.9.6
)

if [[ ! -x "$VPY" ]]; then
  say "error: $VPY not found; run 'make venv' first" >&2
  exit 1
fi
SITE="$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
EXT_SUFFIX="$("$VPY" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')"

# --- KDL (Debian python3-pykdl) ----------------------------------------------
kdl_so() {
  local f
  for f in /usr/lib/python3/dist-packages/PyKDL"$EXT_SUFFIX" /usr/lib/python3/dist-packages/PyKDL.cpython-3*.so; do
    [[ -f "$f" ]] && { printf '%s\n' "$f"; return 0; }
  done
  return 1
}

if ! dpkg -s python3-pykdl >/dev/null 2>&1; then
  if [[ "$(id -u)" != 0 ]]; then
    say "KDL skipped: python3-pykdl is not installed and apt needs root (sudo apt-get install python3-pykdl)"
  else
    say "installing python3-pykdl (apt)"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -q python3-pykdl >/tmp/setup_peers_apt.log 2>&1; then
      # The package lists may be missing or stale on a fresh machine.
      apt-get update -q >>/tmp/setup_peers_apt.log 2>&1
      apt-get install -y -q python3-pykdl >>/tmp/setup_peers_apt.log 2>&1 ||
        say "KDL skipped: apt-get install python3-pykdl failed (see /tmp/setup_peers_apt.log)"
    fi
  fi
fi
KDL_DIR="$VENV/peers/debian-pykdl"
if SO="$(kdl_so)"; then
  mkdir -p "$KDL_DIR"
  find "$KDL_DIR" -mindepth 1 -delete
  ln -s "$SO" "$KDL_DIR/$(basename "$SO")"
  printf '%s\n' "$KDL_DIR" >"$SITE/direction_up_ik_peers_pykdl.pth"
  if "$VPY" -c 'import PyKDL' 2>/tmp/setup_peers_kdl.err; then
    say "KDL ready: PyKDL $("$VPY" -c 'import PyKDL; print(PyKDL.__version__)') from $SO"
  else
    say "KDL skipped: PyKDL does not import in $VPY: $(tail -n 1 /tmp/setup_peers_kdl.err)"
    rm -f "$SITE/direction_up_ik_peers_pykdl.pth"
  fi
else
  rm -f "$SITE/direction_up_ik_peers_pykdl.pth"
  dpkg -s python3-pykdl >/dev/null 2>&1 &&
    say "KDL skipped: python3-pykdl has no module for $EXT_SUFFIX in /usr/lib/python3/dist-packages"
fi

# --- roboticstoolbox-python and ikpy (PyPI) ----------------------------------
PEER_HASH="$( { "$VPY" -c 'import sys; print(sys.version)'; printf '%s\n' "${PEER_PINS[@]}";
               cat "$ROOT"/requirements/*.txt; } | sha256sum | cut -d' ' -f1)"
if [[ -f "$STAMPS/peers" && "$(cat "$STAMPS/peers")" == "$PEER_HASH" ]] &&
   "$VPY" -c 'import roboticstoolbox, ikpy' 2>/dev/null; then
  say "roboticstoolbox-python and ikpy up to date"
else
  say "installing ${PEER_PINS[*]:0:2} (+ pinned dependencies) into ${VENV#"$ROOT"/}"
  CONSTRAINTS=()
  for f in "$ROOT"/requirements/*.txt; do CONSTRAINTS+=(-c "$f"); done
  if "$VPY" -m pip install --quiet --disable-pip-version-check "${CONSTRAINTS[@]}" "${PEER_PINS[@]}" \
       >/tmp/setup_peers_pip.log 2>&1; then
    mkdir -p "$STAMPS"
    printf '%s\n' "$PEER_HASH" >"$STAMPS/peers"
  else
    grep -v -E "^WARNING: Location '.*' is ignored" /tmp/setup_peers_pip.log | tail -n 15 >&2
    say "roboticstoolbox-python/ikpy skipped: pip install failed (full log /tmp/setup_peers_pip.log)"
  fi
fi
"$VPY" - <<'PY'
for name, module in (("roboticstoolbox-python", "roboticstoolbox"), ("ikpy", "ikpy")):
    try:
        mod = __import__(module)
        print(f"[setup_peers] {name} ready: {getattr(mod, '__version__', '?')}")
    except Exception as exc:  # reported, the benchmark skips this peer
        print(f"[setup_peers] {name} not importable: {type(exc).__name__}: {exc}")
PY
exit 0
