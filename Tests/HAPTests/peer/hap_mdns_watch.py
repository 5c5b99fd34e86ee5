#!/usr/bin/env python3
"""An independent mDNS browser for the HomeKit bridge's announcement: python-zeroconf (as
aiohomekit and Home Assistant use it) browses `_hap._tcp.local.` and prints each instance seen,
changed or gone as a JSON line:

    {"event": "added"|"updated"|"removed"|"unresolved", "name": "HomeMQTT My Home._hap._tcp.local.",
     "port": 51826, "addresses": ["127.0.0.1"], "txt": {"sf": "1", ...}}

    hap_mdns_watch.py [--interface 127.0.0.1] [--type _hap._udp.local.] [--hold "NAME" --hold-port PORT]

`--type` browses another service type: `_hap._udp.local.` is HAP over Thread's (issue 42).

`--hold` first registers a service of that instance name itself (another responder holding the
name), and prints {"event": "held", ...} once zeroconf has probed and announced it.
"""
import argparse
import json
import socket
import sys
import threading

from zeroconf import IPVersion, ServiceBrowser, ServiceInfo, ServiceStateChange, Zeroconf

TYPE = "_hap._tcp.local."


_output = threading.Lock()


def say(**fields):
    # One write per line, under a lock: `print` writes the text and its newline separately, and
    # the main thread's "ready" once landed between the browser thread's line and its newline,
    # which made one line of two that the test could not read (it waited for the holder's own
    # instance in vain, with it printed).
    line = json.dumps(fields) + "\n"
    with _output:
        sys.stdout.write(line)
        sys.stdout.flush()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--interface", default="127.0.0.1")
    parser.add_argument("--type", default=TYPE)
    parser.add_argument("--hold")
    parser.add_argument("--hold-port", type=int, default=9)
    args = parser.parse_args()
    zc = Zeroconf(interfaces=[args.interface], ip_version=IPVersion.V4Only)
    if args.hold:
        held = ServiceInfo(
            TYPE, f"{args.hold}.{TYPE}", addresses=[socket.inet_aton(args.interface)], port=args.hold_port,
            properties={"id": "11:22:33:44:55:66", "c#": "1", "sf": "0", "ci": "5", "md": "Holder"},
            server="holder.local.")
        zc.register_service(held)
        say(event="held", name=held.name)
    def changed(zeroconf, service_type, name, state_change):
        if state_change is ServiceStateChange.Removed:
            say(event="removed", name=name)
            return
        # Resolved from the cache, or asked for on the network: three tries of 3 s, since an
        # instance seen and then dropped unresolved is one a test waits for in vain (a CI run
        # once timed out waiting for the holder's own, with nothing said).
        info = None
        for _ in range(3):
            info = zeroconf.get_service_info(service_type, name, timeout=3000)
            if info is not None:
                break
        if info is None:
            say(event="unresolved", name=name, change=state_change.name)
            return
        txt = {k.decode(): (v.decode() if v is not None else None) for k, v in info.properties.items()}
        say(event="added" if state_change is ServiceStateChange.Added else "updated", name=name,
            port=info.port, server=info.server, addresses=info.parsed_addresses(), txt=txt)

    ServiceBrowser(zc, args.type, handlers=[changed])
    say(event="ready")
    try:
        sys.stdin.read()
    finally:
        zc.close()


if __name__ == "__main__":
    main()
