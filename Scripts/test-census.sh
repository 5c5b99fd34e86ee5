#!/usr/bin/env bash
# Which tests run a gateway, and on what (issue 40: at least 70 % on the memory rig).
#
#   Scripts/test-census.sh [swift test options]     run the suite, then count
#   Scripts/test-census.sh --count FILE              count an earlier run's file
#
# Runs the README's two tiers (the fast tier, then EndToEndTests four at a time) with
# HOMEMQTT_TEST_CENSUS set: each way the tests start a gateway (Tests/TestSupport/TestCensus.swift)
# appends `<test> <kind>` to the file when the test ends, kind one of
#   memory     the in-process gateway on the memory broker (Rig.memory, InProcessGateway)
#   mosquitto  the in-process gateway on a real mosquitto (Rig.mosquitto, GatewayHarness)
#   mqttools   the in-process gateway on mqttools' broker, QoS 0 only (Rig.mqttools)
#   binary     the real `homemqtt run`
# Options after the script's name go to both `swift test` runs (e.g. --skip-build
# --scratch-path DIR). Under CI=true or HOMEMQTT_LIVE=1 the rig suites run on mosquitto too.
# A test counts once per kind however many gateways it starts; "on the memory rig" is a test
# with the memory kind, of all the tests with any kind. Failing tests are counted too: the test
# results are swift test's to report, not this script's.
set -uo pipefail
cd "$(dirname "$0")/.."

count() {
    local file=$1
    if [ ! -s "$file" ]; then
        echo "no test recorded a gateway in $file" >&2
        return 1
    fi
    sort -u "$file" | awk '
        { kinds[$2]++; tests[$1] = tests[$1] " " $2 }
        END {
            total = 0; memory = 0
            for (t in tests) { total++; if (tests[t] ~ / memory/) memory++ }
            for (k in kinds) printf "%-10s %4d tests\n", k, kinds[k]
            for (t in tests) { only = tests[t]; combos[only]++ }
            printf "tests that run a gateway: %d; on the memory rig: %d (%.1f %%)\n", total, memory, 100 * memory / total
            for (c in combos) printf "  kinds%-28s %4d tests\n", c, combos[c]
        }'
}

if [ "${1:-}" = "--count" ]; then
    count "$2"
    exit $?
fi

file=$(mktemp "${TMPDIR:-/tmp}/homemqtt-census.XXXXXX")
export HOMEMQTT_TEST_CENSUS=$file
swift test "$@" --skip EndToEndTests
swift test "$@" --parallel --num-workers 4 --filter EndToEndTests
echo "census file: $file"
count "$file"
