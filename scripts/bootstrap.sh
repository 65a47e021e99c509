#!/usr/bin/env bash
# Idempotent set-up of the development environment in <repo>/.venv:
#   1. create the venv (python3 -m venv) if missing;
#   2. install requirements/*.txt when they changed (hash stamp), with uv
#      (installed into the venv first; pip when uv cannot be had), the ROS
#      wheels first so that the msg/srv build (4) overlaps the rest;
#   3. rewrite build-machine include paths in the ROS wheels' *Export.cmake;
#   4. build and install the package's msg/srv (rosidl, plain cmake + make)
#      into the venv prefix when msg/, srv/, CMakeLists.txt or package.xml
#      changed (hash stamp);
#   5. editable install of the Python sources (pip -e, compat mode: the repo
#      root becomes a sys.path entry, so source edits take effect at once);
#   6. bytecode of the installed packages the project imports (once per
#      change of the requirements or of the package's imports) and of the
#      package's sources (those that changed);
#   7. the solver kernels' compile, in the background.
# A run with nothing to do takes a few seconds at most.
#
# Environment: PYTHON (interpreter used to create the venv, default python3),
# VENV (default <repo>/.venv), BOOTSTRAP_JOBS (make -j, default nproc).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
PYTHON="${PYTHON:-python3}"
JOBS="${BOOTSTRAP_JOBS:-$(nproc 2>/dev/null || echo 2)}"
VPY="$VENV/bin/python"
STAMPS="$VENV/.bootstrap"
INTERFACE_BUILD="$VENV/.build/direction_up_ik_interfaces"
START=$SECONDS

say() { printf '[bootstrap] %s\n' "$*"; }

# pip, minus the "Location ... is ignored" noise of index folders that this
# machine's pip configuration names but that do not exist.
pip_install() {
  "$VPY" -m pip install --quiet --disable-pip-version-check "$@" \
    2> >(grep -v -E "^WARNING: Location '.*' is ignored" >&2 || true)
}

# sha256 over the content (and names) of the given files, in the given order.
hash_files() {
  local f
  for f in "$@"; do
    printf '%s\n' "${f#"$ROOT"/}"
    if [[ -f "$f" ]]; then cat "$f"; fi
  done | sha256sum | cut -d' ' -f1
}

# The package's import lines of other packages (its own and relative imports left out), sorted.
package_imports() {
  local line='^[[:space:]]*(import[[:space:]]+[A-Za-z_]|from[[:space:]]+[A-Za-z_][A-Za-z0-9_.]*[[:space:]]+import[[:space:]])'
  { grep -rhE --include='*.py' "$line" "$ROOT/direction_up_ik" || true; } \
    | { grep -v 'direction_up_ik' || true; } | sed -E 's/^[[:space:]]+//' | LC_ALL=C sort -u
}

stamp_matches() { [[ -f "$STAMPS/$1" && "$(cat "$STAMPS/$1")" == "$2" ]]; }
write_stamp() { mkdir -p "$STAMPS"; printf '%s\n' "$2" >"$STAMPS/$1"; }

cd "$ROOT"

# --- 1. venv --------------------------------------------------------------
if [[ ! -x "$VPY" ]]; then
  say "creating venv in ${VENV#"$ROOT"/} ($("$PYTHON" --version 2>&1))"
  "$PYTHON" -m venv "$VENV"
  rm -rf "$STAMPS"
fi
SITE="$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"

# --- 3 and 4: Export.cmake fix-up and msg/srv build, once the ROS wheels are in -------
# (run in the background during step 2 when that installs the requirements)
build_interfaces_if_changed() {
  # --- 3. Export.cmake include paths ----------------------------------------------
  # The message wheels' exported CMake targets name include folders of the
  # machine that built them; CMake rejects include folders that do not exist.
  mapfile -t STALE_EXPORTS < <(grep -l -E '/opt/python/cp[0-9]+-cp[0-9]+' "$VENV"/share/*/cmake/*Export.cmake 2>/dev/null || true)
  if ((${#STALE_EXPORTS[@]})); then
    say "rewriting build-machine include paths in ${#STALE_EXPORTS[@]} *Export.cmake files"
    "$VPY" - "${STALE_EXPORTS[@]}" <<'PY'
import re
import sys
import sysconfig

import numpy

python_include = sysconfig.get_paths()["include"]
numpy_include = numpy.get_include()
# numpy first: its path starts with the interpreter prefix.
numpy_pattern = re.compile(r"/opt/python/cp\d+-cp\d+/lib/python\d+\.\d+/site-packages/numpy/(?:_?core)/include")
python_pattern = re.compile(r"/opt/python/cp\d+-cp\d+/include/python\d+\.\d+")
for path in sys.argv[1:]:
    with open(path, encoding="utf-8") as stream:
        text = stream.read()
    text = numpy_pattern.sub(lambda _: numpy_include, text)
    text = python_pattern.sub(lambda _: python_include, text)
    with open(path, "w", encoding="utf-8") as stream:
        stream.write(text)
PY
    if grep -q -E '/opt/python/cp[0-9]+-cp[0-9]+' "${STALE_EXPORTS[@]}"; then
      say "error: unknown build-machine path left in:" >&2
      grep -n -E '/opt/python/cp[0-9]+-cp[0-9]+' "${STALE_EXPORTS[@]}" >&2
      exit 1
    fi
  fi

  # --- 4. msg/srv --------------------------------------------------------------
  shopt -s nullglob
  IFACE_FILES=("$ROOT/CMakeLists.txt" "$ROOT/package.xml" "$ROOT"/msg/*.msg "$ROOT"/srv/*.srv)
  shopt -u nullglob
  IFACE_HASH="$( { echo "$REQ_HASH"; hash_files "${IFACE_FILES[@]}"; } | sha256sum | cut -d' ' -f1)"
  if stamp_matches interfaces "$IFACE_HASH" && [[ -d "$SITE/direction_up_ik/srv" ]]; then
    say "interfaces up to date"
  else
    say "building msg/srv with rosidl (cmake + make -j$JOBS)"
    rm -f "$STAMPS/interfaces"
    mkdir -p "$INTERFACE_BUILD"
    LOG="$INTERFACE_BUILD/bootstrap.log"
    if ! (
      export CMAKE_PREFIX_PATH="$VENV" AMENT_PREFIX_PATH="$VENV"
      cmake -S "$ROOT" -B "$INTERFACE_BUILD" \
        -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_INSTALL_PREFIX="$VENV" \
        -DPython3_EXECUTABLE="$VPY" \
        -DPython3_FIND_VIRTUALENV=ONLY \
        -DBUILD_TESTING=OFF \
        -DDIRECTION_UP_IK_INTERFACES_ONLY=ON &&
        cmake --build "$INTERFACE_BUILD" -j "$JOBS" &&
        cmake --install "$INTERFACE_BUILD"
    ) >"$LOG" 2>&1; then
      tail -n 40 "$LOG" >&2
      say "error: interface build failed, full log: $LOG" >&2
      exit 1
    fi
    write_stamp interfaces "$IFACE_HASH"
  fi
}

# --- 2. requirements ----------------------------------------------------------
REQ_FILES=("$ROOT/requirements/core.txt" "$ROOT/requirements/ros.txt" "$ROOT/requirements/dev.txt")
REQ_HASH="$( { "$VPY" -c 'import sys; print(sys.version)'; hash_files "${REQ_FILES[@]}" "$ROOT/requirements/bootstrap.txt"; } | sha256sum | cut -d' ' -f1)"
INTERFACE_JOB=""
if stamp_matches requirements "$REQ_HASH"; then
  say "requirements up to date"
else
  mkdir -p "$STAMPS"
  # uv downloads in parallel and installs several times faster than pip; it is a build tool
  # here only (requirements/bootstrap.txt), and pip stays the fallback.
  UV="$VENV/bin/uv"
  if [[ ! -x "$UV" ]] && ! pip_install -r requirements/bootstrap.txt; then
    say "uv could not be installed: installing with pip"
  fi
  LOCK="$STAMPS/requirements.lock"
  if [[ -x "$UV" ]] && UV_NATIVE_TLS=1 "$UV" pip compile --quiet --python "$VPY" --no-header \
      --output-file "$LOCK" "${REQ_FILES[@]}"; then
    uv_install() { UV_NATIVE_TLS=1 "$UV" pip install --quiet --python "$VPY" "$@"; }
    # The ROS wheels and numpy (all the msg/srv build needs) at their locked versions first,
    # then the rest while the msg/srv build runs: nothing installed first changes later.
    say "installing requirements with uv: the ROS wheels, then the rest during the msg/srv build"
    uv_install -r requirements/ros.txt "$(grep -E '^numpy==' requirements/core.txt)" -c "$LOCK"
    build_interfaces_if_changed &
    INTERFACE_JOB=$!
    trap '[[ -n "$INTERFACE_JOB" ]] && kill "$INTERFACE_JOB" 2>/dev/null; true' EXIT
    uv_install -r "$LOCK"
  else
    say "installing requirements with pip (a fresh venv takes a few minutes)"
    pip_install -r requirements/core.txt -r requirements/ros.txt -r requirements/dev.txt
  fi
  write_stamp requirements "$REQ_HASH"
fi

# --- 3 and 4 (unless already running since step 2) -------------------------------------
if [[ -n "$INTERFACE_JOB" ]]; then
  STATUS=0
  wait "$INTERFACE_JOB" || STATUS=$?
  INTERFACE_JOB=""
  ((STATUS == 0)) || exit "$STATUS"
else
  build_interfaces_if_changed
fi

# --- 5. editable install of the sources --------------------------------------
EDIT_HASH="$( { echo "$REQ_HASH"; hash_files "$ROOT/setup.py" "$ROOT/setup.cfg"; } | sha256sum | cut -d' ' -f1)"
if stamp_matches editable "$EDIT_HASH" && compgen -G "$SITE/__editable__.direction_up_ik-*.pth" >/dev/null; then
  say "editable install up to date"
else
  say "installing the package in development mode (pip -e, compat)"
  pip_install --no-deps --no-build-isolation --config-settings editable_mode=compat -e "$ROOT"
  write_stamp editable "$EDIT_HASH"
fi

# direction_up_ik/__init__.py belongs to the Python package; without the
# extend_path line the generated msg/srv are not importable in the venv.
INIT="$ROOT/direction_up_ik/__init__.py"
if [[ ! -f "$INIT" ]] || ! grep -q 'extend_path' "$INIT"; then
  say "warning: direction_up_ik/__init__.py must start with:" >&2
  say '  __path__ = __import__("pkgutil").extend_path(__path__, __name__)' >&2
fi

# --- 6. bytecode ---------------------------------------------------------------------------
# uv installs without bytecode, leaving it to the first import to write; where
# PYTHONDONTWRITEBYTECODE is set (as in many containers) nothing writes it, and every process
# would compile numpy, scipy, numba and rclpy from source: seconds per process
# (docs/performance.md, the thirteenth session). The installed packages the package's modules
# and its test tools import, whole (their lazily imported parts too), not the venv's other tools;
# compileall writes bytecode whatever that variable says, and a file that does not compile is
# left to its import. Once per change of the requirements or of the package's import lines of
# other packages (a module that starts to import one nothing imported before gets it compiled).
BYTECODE_KEY="$( { echo "$REQ_HASH"; package_imports; } | sha256sum | cut -d' ' -f1)"
if ! stamp_matches bytecode "$BYTECODE_KEY"; then
  say "compiling the bytecode of the installed packages the project imports"
  if "$VPY" - "$SITE" <<'PY'; then
import compileall
import importlib
import os
import pkgutil
import sys

site = os.path.realpath(sys.argv[1])
import direction_up_ik  # noqa: E402

names = [info.name for info in pkgutil.walk_packages(direction_up_ik.__path__, "direction_up_ik.",
                                                     onerror=lambda name: None)]
# and what its modules import inside functions (robot descriptions, meshes), and the test tools
names += ["scipy.spatial", "urdf_parser_py.urdf", "xacro", "trimesh", "yaml",
          "pytest", "xdist", "hypothesis"]
for name in names:
    try:
        importlib.import_module(name)
    except Exception:  # modules for a real ROS 2 only (launch_ros, moveit_msgs), absent tools
        pass
tops = set()
for module in list(sys.modules.values()):
    path = getattr(module, "__file__", None)
    if path and os.path.realpath(path).startswith(site + os.sep):
        tops.add(os.path.join(site, os.path.relpath(os.path.realpath(path), site).split(os.sep)[0]))
for top in sorted(tops):
    if os.path.isdir(top):
        compileall.compile_dir(top, quiet=2, workers=0)
    else:
        compileall.compile_file(top, quiet=2)
PY
    write_stamp bytecode "$BYTECODE_KEY"
  else  # tried again by the next run
    say "warning: bytecode compile failed; processes compile their imports from source" >&2
  fi
fi
# The package's own modules and its generated msg/srv: those changed since their bytecode
# was written.
"$VPY" -m compileall -qq -j 0 "$ROOT/direction_up_ik" "$SITE/direction_up_ik" || true

# --- 7. compiled solver kernel -------------------------------------------------
# numba compiles direction_up_ik/core/compiled/ into its disk cache once (minutes; later loads
# take a second). Started in the background, detached, so that nothing waits for it: the node
# answers with the numpy backend until the kernels are ready, and a test run or benchmark that
# needs them waits for this compile (a file lock) instead of compiling them again.
if "$VPY" -c 'import numba' 2>/dev/null; then
  mkdir -p "$STAMPS"
  setsid "$VPY" -m direction_up_ik.precompile >"$STAMPS/precompile.log" 2>&1 </dev/null &
  say "solver kernels: compiling in the background if not cached (log: ${STAMPS#"$ROOT"/}/precompile.log)"
fi

say "done in $((SECONDS - START)) s (venv: ${VENV#"$ROOT"/})"
