#!/usr/bin/env bash
# The LSM-mode hook overhead measured in each guest by bench-payload.sh
# (make vmbench): per kernel, per loop outside and inside a sandbox, the
# median ns/op with the agent attached and not loaded, their ratio, and the
# agent's programs' own time per operation (bpf_stats). Writes
# OUT/bench.tsv (kernel where loop on_ns off_ns ratio programs_ns) and
# prints it as a table.
#
#   bench-report.sh OUT KERNEL...
set -u
out=$1
shift
tsv=$out/bench.tsv
: > "$tsv"
for entry in "$@"; do
    log=$out/$entry/results.log
    [ -f "$log" ] || continue
    kernel=$(sed -n 's/^VMTEST-BOOTED: \([^ ]*\).*/\1/p' "$log" | head -n 1)
    tr -d '\r' < "$log" | awk -v k="${kernel:-$entry}" '
        function median(list,    n, a, i, j, t) {
            n = split(list, a, " ")
            for (i = 2; i <= n; i++)
                for (j = i; j > 1 && a[j] < a[j - 1]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
            return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
        }
        $1 == "BENCH:" { s[$2 " " $3 " " $4] = s[$2 " " $3 " " $4] " " $5; keys[$2 " " $3] = 1 }
        $1 == "BENCH-COST:" { cost[$2 " " $3] += $5 }
        END {
            for (key in keys) {
                if (!((key " on") in s) || !((key " off") in s)) continue
                on = median(s[key " on"]); off = median(s[key " off"])
                split(key, w, " ")
                printf "%s\t%s\t%s\t%.0f\t%.0f\t%.3f\t%.0f\n", k, w[1], w[2], on, off, on / off, cost[key]
            }
        }' | sort -k2,2r -k3,3 >> "$tsv"
done
echo "vmbench: LSM-mode hook overhead, medians of the runs in one guest (agent attached vs not loaded)"
printf '%-14s %-8s %-9s %12s %12s %7s %12s\n' kernel where loop "on ns/op" "off ns/op" ratio "programs ns"
awk -F '\t' '{ printf "%-14s %-8s %-9s %12s %12s %6.2fx %12s\n", $1, $2, $3, $4, $5, $6, $7 }' "$tsv"
for entry in "$@"; do
    [ -f "$out/$entry/results.log" ] &&
        tr -d '\r' < "$out/$entry/results.log" | sed -n "s/^BENCH-INFO: /vmbench: $entry: /p"
done
echo "vmbench: results in $tsv"
