#!/usr/bin/env python3
"""Announces one `_hap._tcp.local` instance over mDNS whose instance name and TXT values hold
terminal escape sequences (clear screen, an OSC window title, a colour) and a NUL, as a hostile
peer on the LAN could: what `homemqtt discover` and the gateway's log must show escaped.

    hostile_announcer.py SECONDS [markup]

With `markup`, the name and model also hold HTML (`<b id="injected">`, `<img id="img-injected">`):
what the web view must show as text, never as elements.

Sends the announcement (PTR, SRV, TXT, A to 127.0.0.1) to 224.0.0.251:5353 every 0.25 s for
SECONDS, from wherever it runs (a test's network namespace, with a multicast route on lo).
"""
import socket
import struct
import sys
import time

NAME = b"Evil\x1b[2J\x1b]0;pwned\x07\x00Lamp"
TXT = [b"id=AB:CD:EF:01:23:45", b"md=Model\x1b[31mRed\x00", b"c#=1", b"s#=1", b"sf=1", b"ci=5", b"ff=0"]


def name(*labels):
    out = b""
    for label in labels:
        out += bytes([len(label)]) + label
    return out + b"\x00"


def record(owner, rtype, rdata, ttl=120, flush=False):
    klass = 1 | (0x8000 if flush else 0)
    return owner + struct.pack("!HHIH", rtype, klass, ttl, len(rdata)) + rdata


def packet(markup=False):
    global NAME, TXT
    if markup:
        NAME = b'<b id="injected">Evil</b>\x1b[2J\x00Lamp'
        TXT = [t if not t.startswith(b"md=") else b'md=<img id="img-injected" src="x">\x1b[31m' for t in TXT]
    service = name(b"_hap", b"_tcp", b"local")
    instance = name(NAME, b"_hap", b"_tcp", b"local")
    host = name(b"evil-lamp", b"local")
    answers = [
        record(service, 12, instance),
        record(instance, 33, struct.pack("!HHH", 0, 0, 51826) + host, flush=True),
        record(instance, 16, b"".join(bytes([len(t)]) + t for t in TXT), flush=True),
        record(host, 1, socket.inet_aton("127.0.0.1"), flush=True),
    ]
    header = struct.pack("!HHHHHH", 0, 0x8400, 0, len(answers), 0, 0)
    return header + b"".join(answers)


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 10
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 255)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
    data = packet(markup=len(sys.argv) > 2 and sys.argv[2] == "markup")
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            sock.sendto(data, ("224.0.0.251", 5353))
        except OSError as error:
            print(f"send failed: {error}", file=sys.stderr, flush=True)
        time.sleep(0.25)


if __name__ == "__main__":
    main()
