#!/usr/bin/env python3
"""aiohomekit's HAP-over-CoAP controller steps, carried over stdio instead of UDP.

aiohomekit 4.0.1's CoAP controller (aiohomekit/controller/coap/connection.py) runs its pairing
state machines, session keys, encryption and PDUs over aiocoap. This script runs the same code
(perform_pair_setup_part1/2, get_session_keys, the same key derivation, EncryptionContext,
encode_pdu/decode_pdu, Pdu09Database, the event parsing of EventResource) with a line protocol
on stdio in place of the network, so a Swift test can hold HomeMQTT's HAP-over-CoAP accessory
to aiohomekit before the libcoap transport exists (Tests/HAPServerTests/CoAPAiohomekitTests.swift).

Protocol: it prints `POST <path> <hex or ->` and reads `<code> <hex or ->` (code as 2.04);
it prints `EVENTS?` and reads `EVENTS <hex> ...` (the event payloads the accessory PUT to it);
it prints results as `PAIRED <id>`, `DATABASE <json>`, `READ <iid> <value>`, `WROTE <iid> <status>`,
`SUBSCRIBED <iid> <status>`, `EVENT <iid> <value>`, and `DONE` at the end.

Usage: .venv/bin/python Scripts/aiohomekit-coap-stdio.py SETUP-CODE BRIGHTNESS-IID NEW-VALUE
"""
import json
import struct
import sys
import uuid

from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

from aiohomekit.controller.coap.connection import EncryptionContext, decode_pdu_03
from aiohomekit.controller.coap.pdu import OpCode, decode_pdu, encode_pdu
from aiohomekit.controller.coap.structs import Pdu09Database
from aiohomekit.protocol import get_session_keys, perform_pair_setup_part1, perform_pair_setup_part2
from aiohomekit.protocol.tlv import HAP_TLV, TLV
from aiohomekit.uuid import normalize_uuid


def post(path, payload):
    print(f"POST {path} {payload.hex() or '-'}", flush=True)
    code, body = sys.stdin.readline().split()
    return code, bytes.fromhex("" if body == "-" else body)


def run_state_machine(path, machine):
    request, expected = machine.send(None)
    while True:
        code, body = post(path, TLV.encode_list(request))
        if code != "2.04":
            raise SystemExit(f"{path} answered {code}")
        try:
            request, expected = machine.send(TLV.decode_bytes(body, expected=expected))
        except StopIteration as result:
            return result.value


def session(enc, opcode, iid, data, tid):
    code, body = post("/", enc.encrypt(encode_pdu(opcode, tid, iid, data)))
    if code != "2.04":
        raise SystemExit(f"/ answered {code}")
    return decode_pdu(tid, enc.decrypt(body))


def main(setup_code, iid, new_value):
    salt, srp_b = run_state_machine("/1", perform_pair_setup_part1(False))
    pairing = run_state_machine("/1", perform_pair_setup_part2(setup_code, str(uuid.uuid4()), salt, srp_b))
    print(f"PAIRED {pairing['AccessoryPairingID']}", flush=True)

    # connection.py's do_pair_verify: the state machine, then the three keys.
    _, derive = run_state_machine("/2", get_session_keys(pairing))
    enc = EncryptionContext(
        ChaCha20Poly1305(derive(b"Control-Salt", b"Control-Read-Encryption-Key")),
        ChaCha20Poly1305(derive(b"Control-Salt", b"Control-Write-Encryption-Key")),
        ChaCha20Poly1305(derive(b"Event-Salt", b"Event-Read-Encryption-Key")),
        "/",
        None,
    )

    _, body = session(enc, OpCode.UNK_09_READ_GATT, 0, b"", 1)
    db = Pdu09Database.decode(body)
    services = [
        {"type": normalize_uuid(f"{s.type:X}"), "characteristics": [c.instance_id for c in s.characteristics]}
        for a in db.accessories
        for s in a.services
    ]
    print(f"DATABASE {json.dumps(services)}", flush=True)

    _, body = session(enc, OpCode.CHAR_READ, iid, b"", 2)
    print(f"READ {iid} {struct.unpack('<i', decode_pdu_03(body))[0]}", flush=True)

    value = TLV.encode_list([(HAP_TLV.kTLVHAPParamValue, struct.pack("<i", new_value))])
    _, result = session(enc, OpCode.CHAR_WRITE, iid, value, 3)
    print(f"WROTE {iid} {result.name if hasattr(result, 'name') else 'SUCCESS'}", flush=True)

    _, result = session(enc, OpCode.UNK_0B_SUBSCRIBE, iid, b"", 4)
    print(f"SUBSCRIBED {iid} {result.name if hasattr(result, 'name') else 'SUCCESS'}", flush=True)

    print("EVENTS?", flush=True)
    for sealed in sys.stdin.readline().split()[1:]:
        # EventResource.render_put's parsing.
        payload = enc.decrypt_event(bytes.fromhex(sealed))
        offset = 0
        while offset < len(payload):
            _, event_iid, body_len = struct.unpack("<BHH", payload[offset : offset + 5])
            body = payload[offset + 5 : offset + 5 + body_len]
            print(f"EVENT {event_iid} {struct.unpack('<i', decode_pdu_03(body))[0]}", flush=True)
            offset += 5 + body_len
    print("DONE", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
