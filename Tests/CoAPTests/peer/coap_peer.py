"""An independent CoAP peer for CoAPTests: aiocoap (and, where a peer must misbehave, a raw UDP
socket whose datagrams aiocoap decodes and encodes). Every mode binds ::1 on a free port, prints
`ready PORT`, then one line per thing the test counts. Modes:

  server      aiocoap server: /piggy answers at once (piggybacked) `piggy:` + payload;
              /slow answers after 3.5 s (aiocoap sends an empty ACK first: a separate response);
              /big answers 5000 bytes (i % 251) (Block2), /slowbig the same after 0.5 s (an empty
              ACK, then Block2 in a separate response); /count answers a POST body's length and
              SHA-256 (Block1 when large). Prints `slow-request` per /slow request.
  blackhole   reads datagrams and never answers; prints `datagram MID` per datagram.
  dropfirst   answers a CON only at its second reception (2.05 `second`); prints `datagram MID`.
  events      aiocoap server: PUT/POST /ev answers 2.04; prints `event PATH HEXPAYLOAD`.
  client METHOD URI HEXPAYLOAD
              one aiocoap request; prints `answer CODE LENGTH SHA256`, or `error TEXT`.
"""
import asyncio
import hashlib
import socket
import sys

import aiocoap
import aiocoap.resource as resource
from aiocoap import Code, Message
from aiocoap.numbers.types import Type


def say(line):
    print(line, flush=True)


def bound_port(context):
    for interface in context.request_interfaces:
        messages = getattr(interface.token_interface, "message_interface", None)
        transport = getattr(messages, "transport", None)
        if transport is not None:
            sock = getattr(transport, "_RecvmsgSelectorDatagramTransport__sock", None)
            sock = sock or transport.get_extra_info("socket")
            return sock.getsockname()[1]
    raise RuntimeError("no UDP transport")


class Piggy(resource.Resource):
    async def render_post(self, request):
        return Message(code=Code.CONTENT, payload=b"piggy:" + request.payload)

    render_put = render_post
    render_get = render_post


class Slow(resource.Resource):
    async def render_post(self, request):
        say("slow-request")
        await asyncio.sleep(3.5)
        return Message(code=Code.CHANGED, payload=b"slow:" + request.payload)


BIG = bytes(i % 251 for i in range(5000))


class Big(resource.Resource):
    async def render_get(self, request):
        return Message(code=Code.CONTENT, payload=BIG)

    render_post = render_get


class SlowBig(resource.Resource):
    """The case libcoap 4.3.1's own client loses: the first Block2 block in a separate response."""

    async def render_post(self, request):
        await asyncio.sleep(0.5)
        return Message(code=Code.CONTENT, payload=BIG)


class Count(resource.Resource):
    """A request body (Block1 when large) as its length and SHA-256."""

    async def render_post(self, request):
        digest = hashlib.sha256(request.payload).hexdigest()
        return Message(code=Code.CHANGED, payload=f"{len(request.payload)} {digest}".encode())


class Event(resource.Resource):
    # The site has stripped the path it matched (`ev`): reaching this resource is the path.
    async def render_put(self, request):
        say(f"event ev {request.payload.hex()}")
        return Message(code=Code.CHANGED)

    render_post = render_put


async def serve(site):
    context = await aiocoap.Context.create_server_context(site, bind=("::1", 0), transports=["udp6"])
    say(f"ready {bound_port(context)}")
    await asyncio.get_running_loop().create_future()


def raw(answer_from):
    sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    sock.bind(("::1", 0))
    say(f"ready {sock.getsockname()[1]}")
    seen = {}
    while True:
        data, address = sock.recvfrom(2048)
        try:
            message = Message.decode(data)
        except Exception:
            say("undecodable")
            continue
        say(f"datagram {message.mid}")
        seen[message.mid] = seen.get(message.mid, 0) + 1
        if answer_from and message.mtype == Type.CON and seen[message.mid] >= answer_from:
            reply = Message(code=Code.CONTENT, payload=b"second")
            reply.mtype, reply.mid, reply.token = Type.ACK, message.mid, message.token
            sock.sendto(reply.encode(), address)


async def client(method, uri, payload):
    context = await aiocoap.Context.create_client_context()
    request = Message(code=getattr(Code, method), uri=uri, payload=payload)
    try:
        response = await asyncio.wait_for(context.request(request).response, 30)
    except Exception as error:
        say(f"error {type(error).__name__}")
        return
    digest = hashlib.sha256(response.payload).hexdigest()
    say(f"answer {response.code.dotted} {len(response.payload)} {digest}")
    await context.shutdown()


def main():
    mode = sys.argv[1]
    if mode == "server":
        site = resource.Site()
        site.add_resource(["piggy"], Piggy())
        site.add_resource(["slow"], Slow())
        site.add_resource(["big"], Big())
        site.add_resource(["slowbig"], SlowBig())
        site.add_resource(["count"], Count())
        asyncio.run(serve(site))
    elif mode == "events":
        site = resource.Site()
        site.add_resource(["ev"], Event())
        asyncio.run(serve(site))
    elif mode == "blackhole":
        raw(None)
    elif mode == "dropfirst":
        raw(2)
    elif mode == "client":
        asyncio.run(client(sys.argv[2], sys.argv[3], bytes.fromhex(sys.argv[4] if len(sys.argv) > 4 else "")))


if __name__ == "__main__":
    main()
