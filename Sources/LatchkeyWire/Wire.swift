// Protocol constants and errors shared by the agent and its clients. docs/PROTOCOL.md is the
// normative description; every constant here appears in its caps table.
import LatchkeyCodec

/// Protocol version numbers and the caps that bound everything a peer can make us allocate.
///
/// Every length or count read from a peer is compared with one of these before any memory is reserved,
/// so a hostile peer can cost us at most the cap, never what it claims (the ssh-agent rule).
package enum Wire {
    /// The protocol version this module speaks; first byte of every request and response payload.
    package static let protocolVersion: UInt8 = 1

    /// Largest request payload the agent reads (1 MiB). Requests carry attribute dictionaries and
    /// passwords, nothing bulky, so anything larger is a mistake or an attack.
    package static let maxRequestFrame = 1 << 20

    /// Largest response payload a client reads (256 MiB). A `kSecMatchLimitAll` query may return many
    /// items with their data, so this is far larger than the request cap but still bounded.
    package static let maxResponseFrame = 256 << 20

    /// Largest password ("secret" field) in create, unlock and changePassword (4096 bytes).
    package static let maxSecretLength = 4096

    /// Deepest nesting of arrays and dictionaries in one value (8). The top-level dictionary of a request
    /// counts as 1. Bounds the decoder's recursion, hence its stack use. The value codec's own cap.
    package static let maxValueDepth = ValueCodec.maxDepth

    /// Most entries in one array or dictionary (1,048,576): enough for a `kSecMatchLimitAll` result over a
    /// large keychain. Memory stays bounded regardless, because every count is checked against the bytes
    /// left in the frame (and the frame against its cap) before anything is reserved. The value codec's
    /// own cap.
    package static let maxCollectionCount = ValueCodec.maxCollectionCount

    /// Longest diagnostic message in a response (65,535 bytes, the u16 length field's range).
    package static let maxMessageLength = Int(UInt16.max)

    /// Size of the frame length prefix (u32 big-endian).
    package static let frameHeaderLength = 4

    // The two statuses this module itself produces when rejecting a request (equal to Apple's
    // errSecUnimplemented and errSecParam). Kept local so the wire layer does not depend on the
    // model's status table.
    static let statusUnimplemented: Int32 = -4
    static let statusParam: Int32 = -50
}

/// Why a frame or payload could not be read, written or decoded.
///
/// Messages never quote payload bytes: a payload may hold a password or item data.
package enum WireError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A frame length (first) exceeds the reader's or writer's cap (`limit`).
    case frameTooLarge(Int, limit: Int)
    /// A frame length of zero; every payload starts with at least a version byte.
    case emptyFrame
    /// The bytes ran out: EOF inside a frame, or a payload shorter than its fields say.
    case truncated
    /// The payload is structurally invalid (bad tag, cap exceeded, invalid UTF-8, trailing bytes...).
    case malformed(String)
    /// The payload's version byte is not `Wire.protocolVersion`.
    case unsupportedVersion(UInt8)
    /// The request opcode is not one this version defines.
    case unknownOpcode(UInt8)
    /// A system call failed with this errno.
    case io(errno: Int32)
    /// The peer closed the connection cleanly before sending any byte of a frame.
    case closed
    /// The caller's deadline passed before the frame was completely read or written.
    case timedOut

    /// A human-readable description, safe for logs and for a response's message field.
    package var description: String {
        switch self {
        case .frameTooLarge(let n, let limit): "frame of \(n) bytes exceeds the limit of \(limit) bytes"
        case .emptyFrame: "empty frame"
        case .truncated: "truncated message"
        case .malformed(let why): "malformed message: \(why)"
        case .unsupportedVersion(let v): "unsupported protocol version \(v)"
        case .unknownOpcode(let op): "unknown opcode \(hexByte(op))"
        case .io(let e): "I/O error (errno \(e))"
        case .closed: "connection closed by peer"
        case .timedOut: "timed out"
        }
    }

    /// The same failure, as the protocol reports it: a value or field that could not be read.
    init(_ error: CodecError) {
        switch error {
        case .truncated: self = .truncated
        case .malformed(let why): self = .malformed(why)
        }
    }

    /// Whether the agent keeps the connection after answering this decode error (docs/PROTOCOL.md,
    /// "Errors"). Only for an unknown opcode: that is a well-formed request from a newer client, which
    /// may go on with requests this agent does know. Anything else means a confused or hostile peer, and
    /// like ssh-agent we stop talking to it.
    package var agentKeepsConnection: Bool {
        if case .unknownOpcode = self { return true }
        return false
    }
}
