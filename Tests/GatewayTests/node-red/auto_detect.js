// What a Node-RED flow gets from an mqtt-in node in its default "auto-detect" output mode, once
// over MQTT 5 and once over MQTT 3.1.1, for every retained message on a topic filter.
//
//   NODE_PATH=/usr/share/nodejs node auto_detect.js --port P [--host H] [--filter F] [--quiet MS]
//
// MQTT.js is the client Node-RED itself uses (Debian's node-mqtt, MQTT.js 4.3.7). Node-RED's
// conversion of a received payload is `subscriptionHandler` in
// packages/node_modules/@node-red/nodes/core/network/10-mqtt.js (Node-RED 3.0 to 5.0; the
// auto-detect mode came in 3.0 with "Use v5 properties to aid auto parsing payload"); `convert`
// below does what it does for the "auto-detect" data type, step for step, with its table of
// media types cut to the entries a gateway can send.
//
// Prints one JSON object: {"5": {topic: entry}, "3.1.1": {topic: entry}}, where an entry is
// {"type": typeof value, "value": value, "contentType": the MQTT 5 content type or null} or
// {"error": ...} where Node-RED would report an error and send nothing. Exits 1 with a message
// on stderr when the broker cannot be reached.
"use strict";
const mqtt = require("mqtt");
const { isUtf8 } = require("buffer");

function option(name, fallback) {
    const i = process.argv.indexOf(name);
    return i > 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}
const host = option("--host", "127.0.0.1");
const port = Number(option("--port", "1883"));
const filter = option("--filter", "home/+/+/+/+/state");
const quietMs = Number(option("--quiet", "700"));
const limitMs = 15000;

// Node-RED's knownMediaTypes, the entries for text and JSON.
const knownMediaTypes = {
    "text/css": "string",
    "text/html": "string",
    "text/plain": "string",
    "application/json": "json",
    "application/octet-stream": "buffer",
    "application/xml": "string",
};

// subscriptionHandler for datatype "auto-detect". `v5` is the broker config's protocol, as
// Node-RED's brokerConn.v5() answers it; `properties` is MQTT.js's packet.properties.
function convert(v5, payload, properties) {
    const msg = {};
    if (v5 && properties) {
        // setStrProp / setBoolProp: a non-empty string; true or false.
        if (properties.contentType && typeof properties.contentType == "string") {
            msg.contentType = properties.contentType;
        }
        if (properties.payloadFormatIndicator != null) {
            if (properties.payloadFormatIndicator === "true" || properties.payloadFormatIndicator === true) {
                msg.payloadFormatIndicator = true;
            } else if (properties.payloadFormatIndicator === "false" || properties.payloadFormatIndicator === false) {
                msg.payloadFormatIndicator = false;
            }
        }
    }
    const v5isUtf8 = v5 ? msg.payloadFormatIndicator === true : null;
    const v5HasMediaType = v5 ? !!msg.contentType : null;
    const v5MediaTypeLC = v5 ? (msg.contentType + "").toLowerCase() : null;
    if (v5isUtf8 || v5HasMediaType) {
        switch (knownMediaTypes[v5MediaTypeLC]) {
            case "string":
                return { value: payload.toString() };
            case "buffer":
                return { value: payload };
            case "json":
                // Node-RED: node.error("invalid-json-parse") and no message sent.
                try {
                    return { value: JSON.parse(payload.toString()) };
                } catch (e) {
                    return { error: "invalid-json-parse: " + e.message };
                }
            default:
                if (v5isUtf8 || isUtf8(payload)) {
                    const text = payload.toString();
                    try {
                        return { value: JSON.parse(text) };
                    } catch (e) {
                        return { value: text };
                    }
                }
                return { value: payload };
        }
    } else if (isUtf8(payload)) {
        const text = payload.toString();
        try {
            return { value: JSON.parse(text) };
        } catch (e) {
            return { value: text };
        }
    }
    return { value: payload };
}

function collect(protocolVersion) {
    return new Promise((resolve, reject) => {
        const v5 = protocolVersion === 5;
        const client = mqtt.connect({
            host, port, protocolVersion, reconnectPeriod: 0, connectTimeout: 5000,
            clientId: "node-red-auto-detect-" + protocolVersion + "-" + process.pid,
        });
        const seen = {};
        let quiet = null;
        const done = () => { client.end(true); resolve(seen); };
        const limit = setTimeout(done, limitMs);
        const rearm = () => { clearTimeout(quiet); quiet = setTimeout(() => { clearTimeout(limit); done(); }, quietMs); };
        client.on("error", (error) => { clearTimeout(limit); client.end(true); reject(error); });
        client.on("connect", () => {
            client.subscribe(filter, { qos: 1 }, (error) => {
                if (error) { clearTimeout(limit); client.end(true); reject(error); return; }
                rearm();
            });
        });
        client.on("message", (topic, payload, packet) => {
            if (!packet.retain || payload.length === 0) return;
            const out = convert(v5, payload, packet.properties);
            const contentType = (packet.properties && packet.properties.contentType) || null;
            seen[topic] = "error" in out
                ? { error: out.error, contentType }
                : { type: Buffer.isBuffer(out.value) ? "buffer" : typeof out.value, value: out.value, contentType };
            rearm();
        });
    });
}

Promise.all([collect(5), collect(4)])
    .then(([five, three]) => {
        process.stdout.write(JSON.stringify({ "5": five, "3.1.1": three }) + "\n");
    })
    .catch((error) => {
        process.stderr.write(`no broker at ${host}:${port}: ${error.message}\n`);
        process.exit(1);
    });
