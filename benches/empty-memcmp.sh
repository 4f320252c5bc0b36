#!/usr/bin/env bash
# Zero-length memcmp/bcmp calls of a command, and where they come from.
#
#   benches/empty-memcmp.sh [-n TOP] -- COMMAND [ARGS...]
#
# Builds benches/empty-memcmp.c (needs cc) and runs COMMAND with it preloaded, then prints how
# many memcmp/bcmp calls the process made, how many had a length of zero, and the TOP (default
# 15) call sites of those, resolved with addr2line against COMMAND's executable (inlined frames
# and source lines when it has debug information, e.g. a bench binary built with
# CARGO_PROFILE_BENCH_DEBUG=true). Such calls cost ~75 ns each on machines whose glibc picks the
# AVX-512 memcmp (docs/benchmarks.md, session 31); compare names that may be empty with
# `api::meta::short_eq`. For a count per request or per dispatch, run twice with different
# numbers of them and divide the difference.
set -euo pipefail

top=15
while [ $# -gt 0 ]; do
    case "$1" in
    -n) top=$2; shift 2 ;;
    --) shift; break ;;
    *) break ;;
    esac
done
[ $# -gt 0 ] || { sed -n 's/^#   //p' "$0"; exit 2; }
for tool in cc addr2line; do
    command -v "$tool" >/dev/null || { echo "$tool not found" >&2; exit 2; }
done

here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O2 -shared -fPIC -o "$work/empty-memcmp.so" "$here/empty-memcmp.c" -ldl
exe=$(command -v "$1")

status=0
EMPTY_MEMCMP_OUT="$work/out" LD_PRELOAD="$work/empty-memcmp.so" "$@" >/dev/null || status=$?
[ -f "$work/out" ] || { echo "the command left no counts (exit $status)" >&2; exit 1; }
head -n 1 "$work/out"
tail -n +2 "$work/out" | sort -rn | head -n "$top" | while read -r count address; do
    # addr2line prints a function and its place for every inlined frame, innermost first: the
    # first of hookscope's own is where the comparison was written.
    where=$(addr2line -f -i -C -e "$exe" "0x$address" | paste - - |
        awk -F '\t' '$1 ~ /hookscope::/ { sub(/.*\/src\//, "src/", $2); print $1 "  " $2; exit }')
    printf '%8d  %s\n' "$count" "${where:-0x$address}"
done
exit "$status"
