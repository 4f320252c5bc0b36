#!/usr/bin/env bash
# HTTPS replay against a local webhook, side by side with wrk.
#
# Builds release, starts the example webhook server (examples/webhook_server.rs) on loopback,
# generates N AdmissionReview inputs (JSON lines) for a configuration with one validating webhook,
# times `hookscope replay --concurrency C --format json > /dev/null` over them, then runs
# `wrk -t1 -cC` for D seconds posting the same body (the AdmissionReview hookscope sends, captured
# from a recorded call) to the same webhook URL, and prints both request rates and their ratio.
#
#   benches/wrk-side-by-side.sh [-n REQUESTS] [-c CONCURRENCY] [-d SECONDS] [-r SITTINGS] [-p PORT] [--h2] [--io-threads N] [--no-build] [--bin-dir DIR]
#
# With -r, the replay, wrk and the floor are run that many times in turn (one sitting each) and
# the median of the sittings' ratios is printed as well.
#
# Defaults: 50000 requests, concurrency 16, wrk for 10 s, 1 sitting, port 18443, no replay IO threads
# (`hookscope replay --io-threads`: 0 keeps the HTTPS connections on the dispatching thread; inputs
# and outputs have a thread each whatever the number). --no-build uses the
# binaries already in target/release; --bin-dir DIR uses DIR/hookscope, DIR/webhook_server and DIR/https_floor
# (copies kept aside, when the target directory is shared and rebuilt by others).
#
# Besides the rates it prints the CPU time each process spent per request (user + system, from
# /usr/bin/time and /proc), which says where the cycles go even on a busy machine, and the
# transport's floor: `examples/https_floor.rs`, hookscope's own HTTPS client posting that same body
# N times with C in flight and nothing else (no input, no dispatch, no report). The floor's rate
# is what the replay would reach if the admission work cost nothing; the difference in CPU per
# request between the replay and the floor is what that work costs.
#
# By default the webhook is reached through a service reference (HTTP/1.1, one connection per
# request in flight, like wrk). With --h2 it is a URL webhook on 127.0.0.1, for which hookscope,
# like kube-apiserver, negotiates HTTP/2 and multiplexes every request over one connection; wrk
# still speaks HTTP/1.1 over C connections.
#
# Needs wrk (Debian: apt-get install wrk), jq and awk.
set -euo pipefail

requests=50000
concurrency=16
duration=10
rounds=1
port=18443
h2=0
io_threads=0
build=1
bin_dir=

usage() {
    sed -n 's/^#   //p' "$0"
    exit 2
}

while [ $# -gt 0 ]; do
    case "$1" in
    -n) requests=$2; shift 2 ;;
    -c) concurrency=$2; shift 2 ;;
    -d) duration=$2; shift 2 ;;
    -r) rounds=$2; shift 2 ;;
    -p) port=$2; shift 2 ;;
    --h2) h2=1; shift ;;
    --io-threads) io_threads=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    --bin-dir) bin_dir=$2; build=0; shift 2 ;;
    -h | --help) usage ;;
    *) echo "unknown argument $1" >&2; usage ;;
    esac
done

case "$rounds" in
'' | *[!0-9]* | 0) echo "-r takes a number of sittings, at least 1" >&2; usage ;;
esac

for tool in wrk jq awk cargo /usr/bin/time; do
    command -v "$tool" >/dev/null || { echo "$tool not found" >&2; exit 2; }
done

cd "$(dirname "$0")/.."
if [ "$build" = 1 ]; then
    cargo build --release --quiet --bin hookscope --example webhook_server --example https_floor
fi
hookscope=${bin_dir:-target/release}/hookscope
webhook_server=${bin_dir:-target/release/examples}/webhook_server
https_floor=${bin_dir:-target/release/examples}/https_floor

work=$(mktemp -d)
server_pid=
cleanup() {
    if [ -n "$server_pid" ]; then
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

# The server gets one runtime thread; the client under test (hookscope's replay runtime is
# single-threaded, wrk runs with -t1) gets the other core.
"$webhook_server" --listen "127.0.0.1:$port" --out "$work/server" \
    --threads 1 >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 100); do
    [ -f "$work/server/ca.pem" ] && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log" >&2; exit 1; }
    sleep 0.1
done
[ -f "$work/server/ca.pem" ] || { echo "webhook server did not start" >&2; exit 1; }

if [ "$h2" = 1 ]; then
    webhooks=(--webhooks "$work/server/validating.yaml")
    protocol="HTTP/2, one connection"
else
    webhooks=(--webhooks "$work/server/validating-service.yaml"
        --resolve "webhook-server.hookscope.svc:443=127.0.0.1:$port")
    protocol="HTTP/1.1"
fi

cat >"$work/cluster.yaml" <<'EOF'
apiVersion: v1
kind: Namespace
metadata:
  name: bench
  labels: {kubernetes.io/metadata.name: bench}
EOF

# N creations of a small ConfigMap, one AdmissionReview per line.
awk -v n="$requests" 'BEGIN {
    for (i = 1; i <= n; i++)
        printf "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"00000000-0000-4000-8000-%012d\",\"kind\":{\"group\":\"\",\"version\":\"v1\",\"kind\":\"ConfigMap\"},\"resource\":{\"group\":\"\",\"version\":\"v1\",\"resource\":\"configmaps\"},\"requestKind\":{\"group\":\"\",\"version\":\"v1\",\"kind\":\"ConfigMap\"},\"requestResource\":{\"group\":\"\",\"version\":\"v1\",\"resource\":\"configmaps\"},\"name\":\"cm-%d\",\"namespace\":\"bench\",\"operation\":\"CREATE\",\"userInfo\":{\"username\":\"alice\",\"uid\":\"1c3a5b2e\",\"groups\":[\"developers\",\"system:authenticated\"]},\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"cm-%d\",\"namespace\":\"bench\",\"labels\":{\"app\":\"web\",\"tier\":\"frontend\"},\"annotations\":{\"example.com/owner\":\"team-web\"}},\"data\":{\"config.yaml\":\"listen: :8080\\nlogLevel: info\\nmetrics: :9090\\n\"}},\"oldObject\":null,\"dryRun\":false,\"options\":{\"apiVersion\":\"meta.k8s.io/v1\",\"kind\":\"CreateOptions\"}}}\n", i, i, i
}' >"$work/input.jsonl"

# The body hookscope posts for such a request, captured from one recorded call (the recording
# only indents it; jq compacts it back).
head -n 1 "$work/input.jsonl" >"$work/one.jsonl"
"$hookscope" replay "${webhooks[@]}" --input "$work/one.jsonl" --cluster "$work/cluster.yaml" \
    --record "$work/recording" >/dev/null
jq -e '.outcome == "http" and .status == 200 and .body.response.allowed == true' \
    "$work"/recording/000001-*/reply.json >/dev/null ||
    { echo "the webhook did not allow the recorded call" >&2; exit 1; }
jq -cj . "$work"/recording/000001-*/request.json >"$work/body.json"
url=$(jq -r .url "$work/recording/index.jsonl")
wrk_url="https://127.0.0.1:$port/${url#https://*/}"

cat >"$work/post.lua" <<EOF
local f = assert(io.open("$work/body.json", "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, */*"
wrk.headers["User-Agent"] = "kube-apiserver-admission"
EOF

# CPU seconds (user + system) the server has used so far.
tick=$(getconf CLK_TCK)
server_cpu() {
    awk -v t="$tick" '{ printf "%.3f", ($14 + $15) / t }' "/proc/$server_pid/stat"
}
# Microseconds of CPU per request.
per_request() {
    awk -v a="$1" -v b="$2" -v n="$3" 'BEGIN { printf "%.1f", (b - a) * 1e6 / n }'
}

# One sitting: the replay, wrk, then the floor, back to back; prints its figures and appends
# "HOOKSCOPE_RATE WRK_RATE" to $work/rates.
sitting() {
    local s0 s1 s2 s3 start end hookscope_rate hookscope_secs hookscope_cpu
    local wrk_rate wrk_requests wrk_cpu floor_line floor_rate floor_cpu path
    s0=$(server_cpu)
    start=$(date +%s%N)
    /usr/bin/time -f "%U %S" -o "$work/hookscope.time" \
        "$hookscope" replay "${webhooks[@]}" --input "$work/input.jsonl" \
        --cluster "$work/cluster.yaml" --concurrency "$concurrency" --io-threads "$io_threads" \
        --format json >/dev/null
    end=$(date +%s%N)
    s1=$(server_cpu)
    hookscope_rate=$(awk -v n="$requests" -v ns=$((end - start)) 'BEGIN { printf "%.0f", n * 1e9 / ns }')
    hookscope_secs=$(awk -v ns=$((end - start)) 'BEGIN { printf "%.2f", ns / 1e9 }')
    hookscope_cpu=$(awk '{ print $1 + $2 }' "$work/hookscope.time")

    /usr/bin/time -f "%U %S" -o "$work/wrk.time" \
        wrk -t1 -c "$concurrency" -d "${duration}s" -s "$work/post.lua" "$wrk_url" >"$work/wrk.txt"
    s2=$(server_cpu)
    wrk_rate=$(awk '/^Requests\/sec:/ { printf "%.0f", $2 }' "$work/wrk.txt")
    wrk_requests=$(awk '/requests in/ { print $1 }' "$work/wrk.txt")
    wrk_cpu=$(awk '{ print $1 + $2 }' "$work/wrk.time")
    if grep -q "Non-2xx" "$work/wrk.txt"; then
        cat "$work/wrk.txt" >&2
        echo "wrk got error responses" >&2
        exit 1
    fi

    # The floor: the same client stack posting the same body, nothing else. Only service
    # references (HTTP/1.1) have one; with --h2 it is skipped.
    floor_line=
    if [ "$h2" = 0 ]; then
        path=${url#https://*/}
        /usr/bin/time -f "%U %S" -o "$work/floor.time" \
            "$https_floor" --service "webhook-server.hookscope.svc:443/${path%%\?*}" \
            --addr "127.0.0.1:$port" --ca "$work/server/ca.pem" --body "$work/body.json" \
            -n "$requests" -c "$concurrency" >"$work/floor.txt"
        s3=$(server_cpu)
        floor_rate=$(awk '{ print $6 }' "$work/floor.txt")
        floor_cpu=$(awk '{ print $1 + $2 }' "$work/floor.time")
        floor_line="floor:            $floor_rate req/s (hookscope's HTTPS client alone, same body, -c $concurrency), $(per_request 0 "$floor_cpu" "$requests") µs CPU per request, server $(per_request "$s2" "$s3" "$requests") µs"
    fi

    echo "hookscope replay: $requests requests in ${hookscope_secs}s = $hookscope_rate req/s" \
        "(--concurrency $concurrency --io-threads $io_threads, $protocol, whole command)"
    echo "wrk:              $wrk_rate req/s (-t1 -c $concurrency -d ${duration}s, HTTP/1.1)"
    echo "CPU per request: hookscope $(per_request 0 "$hookscope_cpu" "$requests") µs," \
        "server $(per_request "$s0" "$s1" "$requests") µs while replaying;" \
        "wrk $(per_request 0 "$wrk_cpu" "$wrk_requests") µs, server $(per_request "$s1" "$s2" "$wrk_requests") µs under wrk"
    if [ -n "$floor_line" ]; then
        echo "$floor_line"
        awk -v a="$floor_rate" -v b="$wrk_rate" 'BEGIN { printf "ratio floor/wrk: %.2f\n", a / b }'
    fi
    awk -v a="$hookscope_rate" -v b="$wrk_rate" \
        'BEGIN { printf "ratio hookscope/wrk: %.2f (target at least 0.70)\n", a / b }'
    echo "$hookscope_rate $wrk_rate" >>"$work/rates"
}

echo "body: $(wc -c <"$work/body.json") bytes posted to $wrk_url"
for round in $(seq "$rounds"); do
    [ "$rounds" = 1 ] || echo "-- sitting $round of $rounds"
    sitting
done
if [ "$rounds" -gt 1 ]; then
    # Each sitting's ratio, and their median: the machine's speed drifts between sittings, and
    # within one sitting the two tools meet the same drift.
    awk '{ printf "%.4f\n", $1 / $2 }' "$work/rates" | sort -n | awk '{ r[NR] = $1 } END {
        median = (NR % 2) ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2
        printf "ratios hookscope/wrk, sorted:"
        for (i = 1; i <= NR; i++) printf " %.2f", r[i]
        printf "\nmedian ratio hookscope/wrk over %d sittings: %.2f (target at least 0.70)\n", NR, median
    }'
fi
