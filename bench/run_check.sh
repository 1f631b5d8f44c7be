#!/usr/bin/env bash
# `sekka check` on N ids (default 100 million, about 2 GB of text) against the classic shell
# pipeline for finding repeated lines, `LC_ALL=C sort | uniq -d`, on the same file in the same
# run (docs/benchmarks.md, "sekka check"). Reports wall time and peak memory (GNU time).
# Everything stays in a temp dir that is removed at exit. N=10000000 for a quicker run.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
N="${N:-100000000}"
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > /dev/null && cmake --build build -j2 > /dev/null
start_work check
# Two workers' ids interleaved in blocks, and 3 planted repeats.
build/cli/sekka gen -n $((N / 2)) --worker-id 1 --lock-dir "$WORK/gen" > "$WORK/a.txt" 2> /dev/null
build/cli/sekka gen -n $((N / 2 - 3)) --worker-id 2 --lock-dir "$WORK/gen" > "$WORK/b.txt" 2> /dev/null
head -3 "$WORK/a.txt" >> "$WORK/b.txt"
paste -d '\n' "$WORK/a.txt" "$WORK/b.txt" | grep -v '^$' > "$WORK/ids.txt"
rm "$WORK/a.txt" "$WORK/b.txt"
echo "ids: $(wc -l < "$WORK/ids.txt"), $(du -h "$WORK/ids.txt" | cut -f1)"
/usr/bin/time -f "sekka check: %e s, peak %M KiB" build/cli/sekka check "$WORK/ids.txt" \
  > "$WORK/check.out" || true
grep -E "^ids|^repeated" "$WORK/check.out"
/usr/bin/time -f "sort | uniq -d: %e s, peak %M KiB (sort)" bash -c \
  "LC_ALL=C sort -S 50% --parallel=2 -T '$WORK' '$WORK/ids.txt' | uniq -d | wc -l"
