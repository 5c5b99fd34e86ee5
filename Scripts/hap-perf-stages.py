#!/usr/bin/env python3
"""Splits the perf samples of `homemqtt-bench hap-profile` by stage of a HAP request: the kernel
by the syscall a sample is in (futex, eventfd, epoll_wait, socket send/recv), user space by the
innermost frame that names a stage (crypto, HTTP parse, JSON, the connection, NIO, the Swift
concurrency runtime, libdispatch). The HAP-python peer's samples are left out.

    mkfifo /tmp/perfctl
    perf record -o hap.data -F 2999 -g --control fifo:/tmp/perfctl -D -1 -- \
        .build/release/homemqtt-bench hap-profile --reads 8000 --writes 0 --perf-control /tmp/perfctl
    Scripts/hap-perf-stages.py hap.data 8000 [STAGE]

prints µs per request for each stage (samples ÷ frequency ÷ requests), and with STAGE (part of a
stage's name) the most frequent four innermost frames of that stage's samples."""
import re
import subprocess
import sys
from collections import Counter

data, requests = sys.argv[1], int(sys.argv[2])
drill = sys.argv[3] if len(sys.argv) > 3 else None
drilled = Counter()
out = subprocess.run(
    ["perf", "script", "-i", data, "-F", "comm,ip,sym,dso"], capture_output=True, text=True
).stdout
header = subprocess.run(["perf", "report", "-i", data, "--header-only"], capture_output=True, text=True).stdout
frequency = int(re.search(r"sample_freq \} = (\d+)", header).group(1))

KERNEL = [
    ("kernel: futex (pool thread wake/park, contended locks)", r"__x64_sys_futex|do_futex"),
    ("kernel: eventfd (waking the event loop)", r"eventfd_write|eventfd_read"),
    ("kernel: epoll_wait (sleep, wake-up, context switch)", r"do_epoll_wait|__x64_sys_epoll_wait|ep_poll"),
    ("kernel: socket send (loopback TCP incl. peer-side softirq)", r"tcp_sendmsg|__sys_sendto|sock_write_iter"),
    ("kernel: socket recv", r"tcp_recvmsg|__sys_recvfrom|sock_read_iter"),
    ("kernel: timerfd", r"timerfd"),
]
USER = [
    ("crypto (ChaCha20-Poly1305 + copies)", r"HAPSessionCipher|HAPCrypto|CCryptoBoringSSL|ChaChaPoly|BoringSSL|6Crypto"),
    ("HTTP response parse", r"HTTPResponseParser|HTTPParse"),
    ("JSON parse/format", r"9HomeModel9JSONValue|JSONParser|JSONValue"),
    ("readCharacteristics/writeCharacteristics (ids, results)", r"readCharacteristics|writeCharacteristics|HAPCharacteristicID"),
    ("inbound bridge (ByteBuffer -> bytes)", r"InboundBridge"),
    ("HAPConnection request/receive (head, watchdog, bookkeeping)", r"13HAPConnection|HAPConnection"),
    ("bench caller loop", r"HAPProfile|14homemqtt_bench"),
    ("NIO (event loop, pipeline, socket calls)", r"7NIOCore|8NIOPosix|NIOConcurrencyHelpers|_NIODataStructures|DequeModule"),
]
DSO = [
    ("Swift concurrency runtime (jobs, task switches)", "libswift_Concurrency"),
    ("libdispatch (pool threads)", "libdispatch"),
]

counts = Counter()
total = 0
for block in out.split("\n\n"):
    lines = [l for l in block.strip().split("\n") if l.strip()]
    if not lines:
        continue
    comm = lines[0].split()[0]
    if comm.startswith("python") or comm == "perf":
        continue
    frames = []
    for l in lines[1:]:
        m = re.match(r"\s*[0-9a-f]+\s+(.*)\s+\((.*)\)\s*$", l)
        if m:
            frames.append((m.group(1), m.group(2)))
    if not frames:
        continue
    total += 1
    stage = None
    if "kernel" in frames[0][1]:
        ks = " ".join(f for f, d in frames if "kernel" in d)
        for name, pat in KERNEL:
            if re.search(pat, ks):
                stage = name
                break
        stage = stage or "kernel: other (irq, page faults, scheduler tick)"
    else:
        for f, d in frames:
            for name, pat in USER:
                if re.search(pat, f):
                    stage = name
                    break
            if stage:
                break
            for name, lib in DSO:
                if lib in d:
                    stage = name
                    break
            if stage:
                break
        stage = stage or "other user (malloc, runtime, libc) " + frames[-1][0][:40]
    counts[stage] += 1
    if drill and drill in stage:
        drilled[" <- ".join(f[:60] for f, d in frames[:4])] += 1

cpu = total / frequency / requests * 1e6
print(f"{total} samples at {frequency} Hz; {cpu:.1f} µs of process CPU per request")
rest = 0
for name, n in counts.most_common():
    share = n / total
    if share < 0.01:
        rest += n
        continue
    print(f"{cpu * share:6.1f} µs  {100 * share:5.1f}%  {name}")
print(f"{cpu * rest / total:6.1f} µs  {100 * rest / total:5.1f}%  (each below 1%)")

if drill:
    for k, n in drilled.most_common(40):
        print(n, k)
