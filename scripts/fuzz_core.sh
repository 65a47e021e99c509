#!/usr/bin/env bash
# Fuzz the pure core: run test/core/test_properties.py and test_analytic_jacobian.py with
# the hypothesis profile "fuzz"
# (>= 10,000 examples over all property tests; the default "ci" profile runs far fewer),
# then print how many examples each test ran and the wall time.
#
#   scripts/fuzz_core.sh [extra pytest args, e.g. -k junk -x]
#
# Environment: VENV (default <repo>/.venv); DIRECTION_UP_IK_BACKEND=numpy|numba picks the
# solver backend. Failing examples are saved in
# .hypothesis/ and replayed first by the next run. Exit status: pytest's.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
LOG="$(mktemp "${TMPDIR:-/tmp}/fuzz_core.XXXXXX.log")"
cd "$ROOT"

start=$SECONDS
HYPOTHESIS_PROFILE=fuzz "$VENV/bin/python" -m pytest test/core/test_properties.py test/core/test_analytic_jacobian.py -q \
    -p no:cacheprovider --hypothesis-show-statistics "$@" 2>&1 | tee "$LOG"
status=${PIPESTATUS[0]}
elapsed=$((SECONDS - start))

# Statistics blocks: "test/...::name:" then per phase "- N passing, M failing, and K invalid".
echo
echo "== examples per test (passing + failing, all phases; invalid = rejected draws) =="
awk '
    /^test\/.*::.*:$/ { name = $1; sub(/:$/, "", name); sub(/.*::/, "", name); order[++n] = name }
    / passing, .* failing/ && name != "" {
        for (i = 1; i <= NF; i++) {
            if ($(i + 1) ~ /^passing/) pass[name] += $i
            if ($(i + 1) ~ /^failing/) fail[name] += $i
            if ($(i + 1) ~ /^invalid/) inval[name] += $i
        }
    }
    END {
        for (i = 1; i <= n; i++) {
            t = order[i]; total += pass[t] + fail[t]
            printf "%8d  %-66s (%d failing, %d invalid)\n", pass[t] + fail[t], t, fail[t], inval[t]
        }
        printf "%8d  total\n", total
    }' "$LOG"
echo "wall time: ${elapsed} s; full log: $LOG"
exit "$status"
