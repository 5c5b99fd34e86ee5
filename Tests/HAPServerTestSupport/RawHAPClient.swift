public import Crypto
import Foundation
public import HAP
public import HomeModel
import TestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// A controller written for the tests, byte by byte over a blocking socket: what a misbehaving
/// peer sends (garbage, half a request, a bad frame) and the ordinary pair-setup, pair-verify
/// and requests, so the server's answers can be read exactly.
public final class RawHAPClient: @unchecked Sendable {
    public let descriptor: Int32
    private var cipher: HAPSessionCipher?
    /// Plaintext received and not yet taken as a message.
    private var inbox: [UInt8] = []
    public private(set) var closed = false

    public struct Message: Equatable, Sendable {
        public var isEvent: Bool
        public var status: Int
        public var body: [UInt8]
        public var json: JSONValue? { try? JSONValue(parsing: body) }
        public var tlv: TLV8? { try? TLV8.decode(body) }
    }

    /// A controller's identity after pair-setup.
    public struct Identity: @unchecked Sendable {
        public var id: String
        public var secretKey: Curve25519.Signing.PrivateKey
        public var accessoryID: String
        public var accessoryKey: [UInt8]
    }

    /// Connects to `host` (an IPv4 or IPv6 literal) and `port`.
    public init(port: Int, host: String = "127.0.0.1") throws {
        let v6 = host.contains(":")
        descriptor = socket(v6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw ProcessError("socket: \(String(cString: strerror(errno)))") }
        let result: Int32
        if v6 {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = in_port_t(UInt16(port).bigEndian)
            inet_pton(AF_INET6, host, &address.sin6_addr)
            result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in6>.size))
                }
            }
        } else {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            address.sin_addr.s_addr = inet_addr(host)
            result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
        guard result == 0 else {
            close(descriptor)
            throw ProcessError("connect to \(host) port \(port): \(String(cString: strerror(errno)))")
        }
    }

    deinit { close(descriptor) }

    public func sendRaw(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes {
                Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            guard sent > 0 else { throw ProcessError("send: \(String(cString: strerror(errno)))") }
            offset += sent
        }
    }

    /// Sends bytes, sealed once the session is encrypted.
    public func send(_ bytes: [UInt8]) throws {
        if var session = cipher {
            let sealed = try session.encrypt(bytes)
            cipher = session
            try sendRaw(sealed)
        } else {
            try sendRaw(bytes)
        }
    }

    public func request(
        _ method: String, _ path: String, body: [UInt8] = [], contentType: String = "application/hap+json",
        timeout: Double = 10
    ) throws -> Message {
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        if !body.isEmpty || method != "GET" {
            head += "Content-Type: \(contentType)\r\nContent-Length: \(body.count)\r\n"
        }
        try send(Array((head + "\r\n").utf8) + body)
        while true {
            let message = try next(timeout: timeout)
            if !message.isEvent { return message }
            pendingEvents.append(message)
        }
    }

    /// Events that came while waiting for a response.
    public var pendingEvents: [Message] = []

    public func json(_ method: String, _ path: String, _ body: JSONValue? = nil) throws -> Message {
        try request(method, path, body: body.map { Array($0.encoded().utf8) } ?? [])
    }

    public func tlv(_ path: String, _ items: [(UInt8, [UInt8])]) throws -> Message {
        var tlv = TLV8()
        for (type, value) in items { tlv.append(type, value) }
        return try request("POST", path, body: tlv.encoded(), contentType: "application/pairing+tlv8")
    }

    /// The next event: one queued while a response was awaited, or the next to arrive.
    public func nextEvent(timeout: Double = 10) throws -> Message {
        if !pendingEvents.isEmpty { return pendingEvents.removeFirst() }
        let message = try next(timeout: timeout)
        guard message.isEvent else { throw ProcessError("expected an event, got HTTP \(message.status)") }
        return message
    }

    /// The next message; throws on close or timeout.
    public func next(timeout: Double = 10) throws -> Message {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let message = try parse() { return message }
            guard !closed else { throw ProcessError("the server closed the connection") }
            guard Date() < deadline else { throw ProcessError("no message within \(timeout) s") }
            try receive(until: deadline)
        }
    }

    /// Whether the server closes the connection within `timeout` (reading what it sends).
    public func isClosed(within timeout: Double) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while !closed && Date() < deadline { try? receive(until: deadline) }
        return closed
    }

    private func receive(until deadline: Date) throws {
        var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        let milliseconds = Int32(max(1, deadline.timeIntervalSinceNow * 1000))
        guard poll(&poller, 1, milliseconds) > 0 else { return }
        var buffer = [UInt8](repeating: 0, count: 65536)
        let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
        guard count > 0 else {
            closed = true
            return
        }
        let bytes = Array(buffer[..<count])
        if var session = cipher {
            inbox += try session.decrypt(bytes)
            cipher = session
        } else {
            inbox += bytes
        }
    }

    private func parse() throws -> Message? {
        guard let end = find([13, 10, 13, 10], in: inbox) else { return nil }
        let head = String(decoding: inbox[..<end], as: UTF8.self)
        let lines = head.components(separatedBy: "\r\n")
        let status = lines[0].split(separator: " ")
        guard status.count >= 3, let code = Int(status[1]) else {
            throw ProcessError("malformed status line '\(lines[0])'")
        }
        var length = 0
        for line in lines.dropFirst() where line.lowercased().hasPrefix("content-length:") {
            length = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) ?? 0
        }
        guard inbox.count >= end + 4 + length else { return nil }
        let body = Array(inbox[(end + 4)..<(end + 4 + length)])
        inbox.removeFirst(end + 4 + length)
        return Message(isEvent: status[0] == "EVENT/1.0", status: code, body: body)
    }

    private func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        return (0...(haystack.count - needle.count)).first { haystack[$0..<$0 + needle.count].elementsEqual(needle) }
    }

    // MARK: Pairing as a controller

    /// Pair-setup M1–M6 with `code`; the step that fails throws with its TLV error.
    public func pairSetup(code: String, id: String? = nil) throws -> Identity {
        let id = id ?? UUID().uuidString
        let m2 = try tlv("/pair-setup", [(TLVType.state, [1]), (TLVType.method, [0])]).tlv
        if let error = m2?[TLVType.error] { throw TLVError(step: 2, code: error.first ?? 0) }
        guard let salt = m2?[TLVType.salt], let B = m2?[TLVType.publicKey] else { throw ProcessError("bad M2") }
        let srp = SRP.Client()
        let proof = try srp.proof(salt: salt, B: B, password: code)
        let m4 = try tlv("/pair-setup", [(TLVType.state, [3]), (TLVType.publicKey, srp.A), (TLVType.proof, proof.M)])
            .tlv
        if let error = m4?[TLVType.error] { throw TLVError(step: 4, code: error.first ?? 0) }
        guard m4?[TLVType.proof] == proof.expectedHAMK else { throw ProcessError("the accessory's proof is wrong") }
        let key = Curve25519.Signing.PrivateKey()
        let ltpk = Array(key.publicKey.rawRepresentation)
        let encKey = HAPCrypto.hkdfSHA512(
            key: proof.K, salt: "Pair-Setup-Encrypt-Salt", info: "Pair-Setup-Encrypt-Info")
        let x = HAPCrypto.hkdfSHA512(
            key: proof.K, salt: "Pair-Setup-Controller-Sign-Salt", info: "Pair-Setup-Controller-Sign-Info")
        var sub = TLV8()
        sub.append(TLVType.identifier, Array(id.utf8))
        sub.append(TLVType.publicKey, ltpk)
        sub.append(TLVType.signature, Array(try key.signature(for: x + Array(id.utf8) + ltpk)))
        let sealed = try HAPCrypto.seal(sub.encoded(), key: encKey, nonce: HAPCrypto.nonce(label: "PS-Msg05"))
        let m6 = try tlv("/pair-setup", [(TLVType.state, [5]), (TLVType.encryptedData, sealed)]).tlv
        if let error = m6?[TLVType.error] { throw TLVError(step: 6, code: error.first ?? 0) }
        guard let reply = m6?[TLVType.encryptedData] else { throw ProcessError("bad M6") }
        let inner = try TLV8.decode(try HAPCrypto.open(reply, key: encKey, nonce: HAPCrypto.nonce(label: "PS-Msg06")))
        guard let accessoryID = inner[TLVType.identifier], let accessoryKey = inner[TLVType.publicKey],
            let signature = inner[TLVType.signature]
        else { throw ProcessError("bad M6 contents") }
        let ax = HAPCrypto.hkdfSHA512(
            key: proof.K, salt: "Pair-Setup-Accessory-Sign-Salt", info: "Pair-Setup-Accessory-Sign-Info")
        guard
            HAPCrypto.verifyEd25519(
                signature: signature, message: ax + accessoryID + accessoryKey, publicKey: accessoryKey)
        else { throw ProcessError("the accessory's M6 signature is invalid") }
        return Identity(
            id: id, secretKey: key, accessoryID: String(decoding: accessoryID, as: UTF8.self),
            accessoryKey: accessoryKey)
    }

    /// Pair-verify M1–M4; the session is encrypted afterwards.
    public func pairVerify(_ identity: Identity) throws {
        let ephemeral = Curve25519.KeyAgreement.PrivateKey()
        let ours = Array(ephemeral.publicKey.rawRepresentation)
        let m2 = try tlv("/pair-verify", [(TLVType.state, [1]), (TLVType.publicKey, ours)]).tlv
        if let error = m2?[TLVType.error] { throw TLVError(step: 2, code: error.first ?? 0) }
        guard let theirs = m2?[TLVType.publicKey], let sealed = m2?[TLVType.encryptedData] else {
            throw ProcessError("bad verify M2")
        }
        let shared = try HAPCrypto.x25519(privateKey: Array(ephemeral.rawRepresentation), peerPublicKey: theirs)
        let key = HAPCrypto.hkdfSHA512(key: shared, salt: "Pair-Verify-Encrypt-Salt", info: "Pair-Verify-Encrypt-Info")
        let inner = try TLV8.decode(try HAPCrypto.open(sealed, key: key, nonce: HAPCrypto.nonce(label: "PV-Msg02")))
        guard let accessoryID = inner[TLVType.identifier], let signature = inner[TLVType.signature],
            HAPCrypto.verifyEd25519(
                signature: signature, message: theirs + accessoryID + ours, publicKey: identity.accessoryKey)
        else { throw ProcessError("the accessory's verify M2 does not check out") }
        let id = Array(identity.id.utf8)
        var sub = TLV8()
        sub.append(TLVType.identifier, id)
        sub.append(TLVType.signature, Array(try identity.secretKey.signature(for: ours + id + theirs)))
        let m3 = try HAPCrypto.seal(sub.encoded(), key: key, nonce: HAPCrypto.nonce(label: "PV-Msg03"))
        let m4 = try tlv("/pair-verify", [(TLVType.state, [3]), (TLVType.encryptedData, m3)]).tlv
        if let error = m4?[TLVType.error] { throw TLVError(step: 4, code: error.first ?? 0) }
        cipher = HAPSessionCipher(sharedSecret: shared, isController: true)
    }
}

public struct TLVError: Error, Equatable {
    public var step: Int
    public var code: UInt8

    public init(step: Int, code: UInt8) {
        self.step = step
        self.code = code
    }
}
