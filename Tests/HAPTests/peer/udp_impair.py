#!/usr/bin/env python3
"""A lossy, slow UDP link in user space, for HAP over Thread tests (issue 42).

The issue asks for `tc netem`; the kernels the tests run on are built without it
(CONFIG_NET_SCH_NETEM is not set), so this relay stands in for the link. A controller sends to
the relay's address; each client address gets an upstream socket of its own towards the target
(the accessory), so the accessory sees one peer per controller and its replies and event PUTs go
back through the same path. Once told to, every datagram in either direction is dropped with
probability LOSS, or delivered DELAY seconds later.

    udp_impair.py --listen HOST PORT --target HOST PORT [--seed N]

Prints {"event": "ready", "port": PORT} once listening. Commands, one a line on stdin:
    impair LOSS DELAY    from now on (e.g. `impair 0.2 1.0`)
    clear                a clean link again
    stats                prints {"event": "stats", "forwarded": N, "dropped": M}
Ends when stdin closes.
"""
import argparse
import asyncio
import json
import random
import socket
import sys


def say(**fields):
    print(json.dumps(fields), flush=True)


class Relay:
    def __init__(self, loop, listen, target, seed):
        self.loop = loop
        self.target = target
        self.random = random.Random(seed)
        self.loss, self.delay = 0.0, 0.0
        self.forwarded = self.dropped = 0
        self.down = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        self.down.bind(listen)
        self.down.setblocking(False)
        self.bind_host = listen[0]
        self.upstream = {}
        loop.add_reader(self.down, self.from_clients)

    def port(self):
        return self.down.getsockname()[1]

    def send(self, sock, data, address):
        if self.random.random() < self.loss:
            self.dropped += 1
            return
        self.forwarded += 1
        if self.delay > 0:
            self.loop.call_later(self.delay, self.sendto, sock, data, address)
        else:
            self.sendto(sock, data, address)

    @staticmethod
    def sendto(sock, data, address):
        try:
            sock.sendto(data, address)
        except OSError:
            pass  # an unreachable peer is a lost datagram, as on a link

    def from_clients(self):
        while True:
            try:
                data, client = self.down.recvfrom(65535)
            except BlockingIOError:
                return
            up = self.upstream.get(client)
            if up is None:
                up = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
                up.bind((self.bind_host, 0))
                up.setblocking(False)
                self.upstream[client] = up
                self.loop.add_reader(up, self.from_target, up, client)
            self.send(up, data, self.target)

    def from_target(self, up, client):
        while True:
            try:
                data, _ = up.recvfrom(65535)
            except BlockingIOError:
                return
            self.send(self.down, data, client)


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--listen", nargs=2, required=True)
    parser.add_argument("--target", nargs=2, required=True)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    loop = asyncio.get_running_loop()
    relay = Relay(
        loop, (args.listen[0], int(args.listen[1])), (args.target[0], int(args.target[1])), args.seed)
    say(event="ready", port=relay.port())
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while True:
        line = await reader.readline()
        if not line:
            break
        words = line.decode().split()
        if words[:1] == ["impair"]:
            relay.loss, relay.delay = float(words[1]), float(words[2])
            say(event="impaired", loss=relay.loss, delay=relay.delay)
        elif words[:1] == ["clear"]:
            relay.loss, relay.delay = 0.0, 0.0
            say(event="cleared")
        elif words[:1] == ["stats"]:
            say(event="stats", forwarded=relay.forwarded, dropped=relay.dropped)


if __name__ == "__main__":
    asyncio.run(main())
