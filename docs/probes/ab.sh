#!/bin/bash
# A/B two or more glmw builds the way docs/perf-journal.md does: the same
# bench arguments, the builds alternating, ROUNDS rounds, one GPU, one file.
#
#   docs/probes/ab.sh FILE ROUNDS "BENCH ARGS" BIN...
#   docs/probes/ab.sh glm.gguf 3 "-p 512 -n 0 -r 3" ./glmw-main ./glmw-new
#
# FILE: `glmw synth --preset glm-4.7-flash --seed 1 -o glm.gguf` (17 GB).
# Prints one line per run (each test's t/s, the mean ± sd of `-r`) and
# appends every run's whole output to ab.log. Alternating keeps drift
# (clocks, temperature, other tenants) out of the difference; two builds
# of the same work have differed by up to ~0.8% on an H200, so a change
# below that is read as equal.
set -euo pipefail
file=$1; rounds=$2; args=$3; shift 3
for r in $(seq "$rounds"); do
  for b in "$@"; do
    out=$("$b" bench -m "$file" $args 2>&1)
    { echo "=== $b round $r: $args"; echo "$out"; } >> ab.log
    echo "$b r$r: $(echo "$out" | grep -E '^\| *(pp|tg)' | awk -F'|' '{printf "%s=%s ", $2, $3}')"
  done
done
