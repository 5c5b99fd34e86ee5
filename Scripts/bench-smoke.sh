#!/usr/bin/env bash
# Runs `homemqtt-bench --scale small` as a user would, so that the benchmark cannot rot: every
# scenario must run to its end and print its rows, and its table must have its shape. Timings are
# not checked (they are the benchmark's business, not the tests'). This was BenchmarkSmokeTests
# inside `swift test` (minutes of valgrind and idle windows); it is a step of its own in .ci/run.
# Arguments go to `swift build` (e.g. --scratch-path DIR). Exit 0 when every check passes.
set -euo pipefail
cd "$(dirname "$0")/.."
swift build --product homemqtt-bench "$@"
# Scenario 8 runs the gateway's own binary, built beside the bench.
swift build --product homemqtt "$@"
bench="$(swift build --show-bin-path "$@")/homemqtt-bench"
work=$(mktemp -d "${TMPDIR:-/tmp}/homemqtt-bench-smoke.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir "$work/profile"

# An unknown scenario is refused by name.
status=0
timeout 60 "$bench" --only 10 >"$work/only.out" 2>"$work/only.err" || status=$?
if [ "$status" -eq 0 ] || ! grep -qF -- "--only must be 1, 2, 3, 4, 5, 6, 7, 8 or 9" "$work/only.err"; then
    echo "bench-smoke: --only 10 was not refused by name (exit $status):" >&2
    cat "$work/only.err" >&2
    exit 1
fi

# Every scenario at small scale, and the table it prints.
status=0
timeout 600 "$bench" --scale small --profile-dir "$work/profile" >"$work/out" 2>"$work/err" || status=$?
cat "$work/out"
if [ "$status" -ne 0 ]; then
    echo "bench-smoke: homemqtt-bench --scale small exited $status; stderr:" >&2
    cat "$work/err" >&2
    exit 1
fi
python3 - "$work/out" "$work/profile" <<'EOF'
import os
import sys

out_path, profile = sys.argv[1], sys.argv[2]
out = open(out_path, encoding="utf-8").read()
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
    return condition


def cells(line):
    return [cell.strip() for cell in line.split("|")[1:-1]]


def number(cell, unit):
    """'0.033 %' -> 0.033 when the cell is a number in `unit`."""
    if not cell.endswith(" " + unit):
        return None
    try:
        return float(cell[: -len(unit) - 1])
    except ValueError:
        return None


lines = out.split("\n")
header = next((i for i, line in enumerate(lines) if line.startswith("| scenario")), None)
if header is None:
    sys.exit("bench-smoke: no table in the output")
check(
    cells(lines[header]) == ["scenario", "metric", "HomeMQTT", "baseline", "ratio", "target", "met?"],
    f"header: {cells(lines[header])}",
)
rows = [cells(line) for line in lines[header + 2 :] if line.startswith("|")]
for row in rows:
    if check(len(row) == 7, f"a row with {len(row)} cells: {row}"):
        check(row[-1] != "FAILED", f"a scenario failed: {row}")
rows = [row for row in rows if len(row) == 7]
for scenario in [
    "1 notification throughput", "2 write round trip", "3 start-up", "4 HAP", "5 web view", "6 idle",
    "7 instructions", "8 bridge", "9 thread",
]:
    check(any(row[0] == scenario for row in rows), f"no row for '{scenario}'")
# The MQTT scenarios always have their baseline beside the figure.
for row in rows:
    if not row[0].startswith(("4", "8", "9")) and row[4] != "—":
        check(row[4].endswith("×"), f"a ratio that is not one: {row}")
check(
    any(r[0] == "1 notification throughput" and r[3].startswith("bare publisher") for r in rows),
    "scenario 1 has no bare publisher baseline",
)
check(
    any(r[0] == "1 notification throughput" and r[1].startswith("CPU time per message") and r[2].endswith("µs")
        and r[3].startswith("bare publisher ") for r in rows),
    "scenario 1 has no CPU time per message beside the bare publisher's",
)
check(
    any(r[0] == "2 write round trip" and r[3].startswith("echo client") for r in rows),
    "scenario 2 has no echo client baseline",
)
check(any(r[0] == "3 start-up" and "peak RSS" in r[1] for r in rows), "scenario 3 has no peak RSS row")
# The idle rows: a CPU share and RSS figures, each beside its baseline, all plausible.
idle = [r for r in rows if r[0] == "6 idle"]
cpu = next((r for r in idle if "CPU over" in r[1]), None)
if check(cpu is not None, f"no idle CPU row in: {idle}"):
    share = number(cpu[2], "%")
    check(share is not None and share >= 0, f"idle CPU: {cpu}")
    check(cpu[3].startswith("bare subscriber"), f"idle CPU baseline: {cpu}")
    check(cpu[5] == "≤ 0.1 % of a core", f"idle CPU target: {cpu}")
for metric in ["peak RSS (VmHWM)", "RSS (VmRSS)"]:
    row = next((r for r in idle if "default home" in r[1] and r[1].endswith(metric)), None)
    if check(row is not None, f"no idle {metric} row in: {idle}"):
        megabytes = number(row[2], "MB")
        check(megabytes is not None and megabytes > 0, f"idle {metric}: {row}")
        check(row[3].startswith("bare subscriber"), f"idle {metric} baseline: {row}")
        check(row[5] == "≤ 30 MB", f"idle {metric} target: {row}")
# The instruction counts: the gateway's per round trip beside the echo client's, and the HAP
# controller's per read (blocked only without the HAP peer).
instructions = [r for r in rows if r[0] == "7 instructions"]
trip = next((r for r in instructions if r[1].startswith("set → state round trip")), None)
if check(trip is not None, f"no round trip row in: {instructions}"):
    check(trip[2].endswith(" instr"), f"round trip: {trip}")
    check(trip[3].startswith("echo client ") and trip[3].endswith(" instr"), f"round trip baseline: {trip}")
# The notification path's: per source change, its two profiles kept beside the round trip's.
notify = next((r for r in instructions if r[1].startswith("source change → state notification")), None)
if check(notify is not None, f"no notification row in: {instructions}"):
    check(notify[2].endswith(" instr"), f"notification: {notify}")
    for count in [100, 200]:
        check(os.path.isfile(f"{profile}/callgrind.notify-{count}.out"), f"no notification profile of {count}")
read = next((r for r in instructions if r[1].startswith("HAP read")), None)
if check(read is not None, f"no HAP read row in: {instructions}"):
    check(read[2].endswith(" instr") or read[2] == "blocked", f"HAP read: {read}")
# The bridge rows: each figure beside HAP-python's, measured by aiohomekit, on the same accessories.
bridge = [r for r in rows if r[0] == "8 bridge"]
for prefix in [
    "pair-verify", "GET /accessories", "read (", "write (", "events/s to one subscribed controller",
    "server CPU per read", "server CPU per write",
]:
    row = next((r for r in bridge if r[1].startswith(prefix)), None)
    if check(row is not None, f"no bridge row '{prefix}' in: {bridge}"):
        check(row[3].startswith("HAP-python 5.0.0 "), f"bridge baseline: {row}")
        # CPU over a small loop may be under one clock tick: then no ratio.
        check(row[4].endswith("×") or (prefix.startswith("server CPU") and row[4] == "—"), f"bridge ratio: {row}")
document = next((r for r in bridge if r[1].startswith("GET /accessories")), None)
if document is not None:
    served = document[1][document[1].index("(") + 1 : document[1].index(")")].split(" / ")
    check(len(served) == 2 and served[0] == served[1], f"the two bridges serve different accessories: {document}")
    check(served[0].startswith("11 acc,"), f"not the bridge and 10 accessories: {document}")
events = next((r for r in bridge if r[1].startswith("events/s")), None)
if events is not None:
    check("delivered 20/20, 20/20, 20/20" in events[1], f"events lost: {events}")
check(
    any(r[1] == "controller" and r[2] == "aiohomekit 4.0.1" for r in bridge), f"no aiohomekit 4.0.1 in: {bridge}"
)
# The Thread client rows: our HAP-over-CoAP controller beside aiohomekit's, against the same
# kind of simulated Thread accessory, every event delivered to both.
thread = [r for r in rows if r[0] == "9 thread"]
for prefix in ["read (", "write (", "client CPU per read", "client CPU per write", "events/s"]:
    row = next((r for r in thread if r[1].startswith(prefix)), None)
    if check(row is not None, f"no thread row '{prefix}' in: {thread}"):
        check(row[3].startswith("aiohomekit 4.0.1 "), f"thread baseline: {row}")
        check(row[4].endswith("×"), f"thread ratio: {row}")
events = next((r for r in thread if r[1].startswith("events/s")), None)
if events is not None:
    check("delivered 20/20, 20/20, 20/20" in events[1], f"thread events lost: {events}")
summary_path = f"{profile}/set-round-trip.md"
check(
    f"scenario 7: the set round trip's top functions per round trip (callgrind): {summary_path}" in out,
    "no callgrind summary named in the output",
)
try:
    summary = open(summary_path, encoding="utf-8").read()
    check("| instr per round trip | share | function [object] |" in summary, f"{summary_path}: {summary[:400]}")
except OSError as error:
    check(False, f"{summary_path}: {error}")
if failures:
    print("bench-smoke: " + "\nbench-smoke: ".join(failures), file=sys.stderr)
    sys.exit(1)
print(f"bench-smoke: {len(rows)} rows, every check passed")
EOF
