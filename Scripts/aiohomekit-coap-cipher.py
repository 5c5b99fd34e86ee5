#!/usr/bin/env python3
"""Runs aiohomekit's HAP-over-CoAP session encryption (the controller's EncryptionContext in
aiohomekit.controller.coap.connection, keys derived as its do_pair_verify derives them) on
what it reads as JSON on stdin, and prints JSON: the keys, the requests it sealed and the
responses and events it opened. Tests/HAPTests/CoAPSessionCipherTests.swift holds HAP's
cipher (Sources/HAP/CoAP/CoAPSessionCipher.swift) to it.

stdin:  {"secret": HEX, "requests": [HEX, ...], "responses": [HEX, ...], "events": [HEX, ...]}
stdout: {"keys": {"read": HEX, "write": HEX, "event": HEX}, "sealed_requests": [HEX, ...],
         "opened_responses": [HEX or null, ...], "opened_events": [HEX or null, ...]}
Requests are sealed first, then responses opened in order (with aiohomekit's recovery of a
counter out of step), then events. Needs the venv's aiohomekit.
"""
import asyncio
import json
import sys
from types import SimpleNamespace

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

from aiohomekit.controller.coap.connection import EncryptionContext
from aiohomekit.crypto.hkdf import hkdf_derive
from aiohomekit.exceptions import EncryptionError


async def main():
    job = json.load(sys.stdin)
    secret = bytes.fromhex(job["secret"])

    def derive(salt, info):
        return hkdf_derive(secret, salt, info, length=32)

    read = derive(b"Control-Salt", b"Control-Read-Encryption-Key")
    write = derive(b"Control-Salt", b"Control-Write-Encryption-Key")
    event = derive(b"Event-Salt", b"Event-Read-Encryption-Key")
    ctx = EncryptionContext(ChaCha20Poly1305(read), ChaCha20Poly1305(write), ChaCha20Poly1305(event), "coap://x/", None)
    sealed = [ctx.encrypt(bytes.fromhex(r)).hex() for r in job.get("requests", [])]
    opened = []
    for r in job.get("responses", []):
        try:
            opened.append((await ctx._decrypt_response(SimpleNamespace(payload=bytes.fromhex(r)))).hex())
        except EncryptionError:
            opened.append(None)
    events = []
    for e in job.get("events", []):
        try:
            events.append(ctx.decrypt_event(bytes.fromhex(e)).hex())
        except InvalidTag:
            events.append(None)
    json.dump(
        {
            "keys": {"read": read.hex(), "write": write.hex(), "event": event.hex()},
            "sealed_requests": sealed,
            "opened_responses": opened,
            "opened_events": events,
        },
        sys.stdout,
    )
    print()


if __name__ == "__main__":
    asyncio.run(main())
