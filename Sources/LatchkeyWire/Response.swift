import LatchkeyCodec
import LatchkeyModel
import LatchkeySecrets

/// One response from the agent: an Apple `OSStatus`, the result value `SecItemAdd` or
/// `SecItemCopyMatching` would return (or an opcode's own result), and an optional human-readable detail.
package struct Response: Sendable, Equatable, CustomStringConvertible {
    /// Apple `OSStatus`; 0 (errSecSuccess) on success.
    package var status: Int32
    /// The result, if the operation returns one.
    package var value: SecValue?
    /// A diagnostic detail for people (which file is corrupt, which key was wrong); never a secret.
    /// Truncated to `Wire.maxMessageLength` UTF-8 bytes on encoding.
    package var message: String?

    // Flag bits of the response header.
    private static let hasValue: UInt8 = 0x01
    private static let hasMessage: UInt8 = 0x02

    /// A response with the given parts.
    package init(status: Int32 = 0, value: SecValue? = nil, message: String? = nil) {
        self.status = status
        self.value = value
        self.message = message
    }

    /// The response the agent sends when a request cannot be decoded (docs/PROTOCOL.md, "Errors"):
    /// errSecUnimplemented (-4) for an unsupported version or unknown opcode, errSecParam (-50) for
    /// anything else, with the error's description as the message. Whether to keep the connection
    /// afterwards is `error.agentKeepsConnection`.
    package init(rejecting error: WireError) {
        switch error {
        case .unsupportedVersion, .unknownOpcode:
            self.init(status: Wire.statusUnimplemented, message: error.description)
        default:
            self.init(status: Wire.statusParam, message: error.description)
        }
    }

    /// True when `status` is errSecSuccess.
    package var isSuccess: Bool { status == 0 }

    /// Status, the value's type and the message; never the value itself (it may be item data).
    package var description: String {
        var parts = ["status: \(status)"]
        if let value { parts.append("value: \(value.typeName)") }
        if let message { parts.append("message: \(message)") }
        return "Response(" + parts.joined(separator: ", ") + ")"
    }

    // MARK: Encoding

    /// The payload (version, status, flags, value, message) without the frame length prefix, allocated
    /// once at its exact size (item data in the value must not be left behind by array growth).
    package func encode() -> [UInt8] {
        let messageBytes = message.map(Response.truncatedUTF8)
        var out: [UInt8] = []
        out.reserveCapacity(Response.encodedSize(value: value, messageBytes: messageBytes))
        out.append(Wire.protocolVersion)
        out.appendBE(UInt32(bitPattern: status))
        out.append((value == nil ? 0 : Response.hasValue) | (messageBytes == nil ? 0 : Response.hasMessage))
        if let value { ValueCodec.encode(value, into: &out) }
        if let messageBytes {
            out.appendBE(UInt16(messageBytes.count))
            out.append(contentsOf: messageBytes)
        }
        return out
    }

    /// Number of bytes `encode()` produces; lets the agent check `Wire.maxResponseFrame` cheaply.
    package var encodedSize: Int {
        Response.encodedSize(value: value, messageBytes: message.map(Response.truncatedUTF8))
    }

    private static func encodedSize(value: SecValue?, messageBytes: [UInt8]?) -> Int {
        1 + 4 + 1 + (value.map(ValueCodec.encodedSize) ?? 0) + (messageBytes.map { 2 + $0.count } ?? 0)
    }

    /// The message's UTF-8, cut at a scalar boundary so it fits the u16 length and stays valid UTF-8.
    private static func truncatedUTF8(_ message: String) -> [UInt8] {
        if message.utf8.count <= Wire.maxMessageLength { return Array(message.utf8) }
        var out: [UInt8] = []
        for scalar in message.unicodeScalars {
            let width = UTF8.width(scalar)
            if out.count + width > Wire.maxMessageLength { break }
            out.append(contentsOf: UTF8.encode(scalar)!)
        }
        return out
    }

    // MARK: Decoding

    /// Decodes a response payload, leaving `payload` untouched.
    package static func decode(_ payload: [UInt8]) throws(WireError) -> Response {
        let result = payload.withUnsafeBytes { raw in
            Result { () throws(WireError) -> Response in try decode(raw) }
        }
        return try result.get()
    }

    /// Decodes a response payload and then wipes `payload` in place (it may hold item data), whether or
    /// not decoding succeeded. Keep no other reference to the array.
    package static func decode(wiping payload: inout [UInt8]) throws(WireError) -> Response {
        let result = payload.withUnsafeBytes { raw in
            Result { () throws(WireError) -> Response in try decode(raw) }
        }
        SecretBytes.wipe(&payload)
        return try result.get()
    }

    private static func decode(_ raw: UnsafeRawBufferPointer) throws(WireError) -> Response {
        var reader = WireReader(raw)
        let version = try reader.u8()
        guard version == Wire.protocolVersion else { throw .unsupportedVersion(version) }
        let status = Int32(bitPattern: try reader.u32())
        let flags = try reader.u8()
        // Undefined bits must be zero: a field this decoder does not know cannot be skipped safely.
        guard flags & ~(hasValue | hasMessage) == 0 else {
            throw .malformed("undefined response flags \(hexByte(flags))")
        }
        var response = Response(status: status)
        if flags & hasValue != 0 {
            response.value = try reader.value()
        }
        if flags & hasMessage != 0 {
            let n = Int(try reader.u16())
            let bytes = try reader.bytes(n)
            guard let text = String(strictUTF8: bytes.assumingMemoryBound(to: UInt8.self)) else {
                throw .malformed("message is not valid UTF-8")
            }
            response.message = text
        }
        try reader.expectEnd()
        return response
    }
}
