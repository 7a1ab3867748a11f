import LatchkeyModel
import LatchkeyTransport
import LatchkeyWire

#if canImport(Glibc)
    import Glibc
#endif

/// The agent's side of a connection, fed from a fuzzer: the bytes a client sent go through a real socket
/// into `FrameIO.readFrame` with the agent's cap and a deadline, each payload into `Request.decode(wiping:)`,
/// and every SecItem dictionary of a request into `DictionaryParser`, as `AgentServer.serve` and the
/// engine would. A connection ends where the agent would drop it.
///
/// Checks, beyond "does not trap": each failure is one the agent expects from a client's bytes (a stream
/// held in a socket buffer is never `.io` or `.timedOut`, a decoded payload never `.frameTooLarge`), and
/// every request that decodes re-encodes to bytes that decode to the same canonical bytes.
package enum FrameTarget {
    /// A fuzz input larger than this is cut here: it has to fit in the socket's buffer, which is filled
    /// before the reader starts (one thread keeps the fuzzer's runs reproducible). libFuzzer's `-max_len`
    /// in `scripts/fuzz` stays below it.
    package static let maxInput = 64 << 10

    /// How long the reader waits for bytes that are not coming. Everything is in the buffer before the
    /// first read, so reaching the deadline at all is a finding (a reader that waits instead of seeing EOF).
    static let readDeadline: Duration = .seconds(5)

    /// Feeds `input` to the agent's reading and parsing code and returns what happened.
    package static func run(_ input: [UInt8]) -> FuzzOutcome {
        var outcome = FuzzOutcome()
        var pair: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0 else {
            outcome.problems.append("socketpair failed: errno \(errno)")
            return outcome
        }
        defer {
            close(pair[0])
            close(pair[1])
        }
        var size = Int32(2 * maxInput)
        setsockopt(pair[0], SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        let bytes = Array(input.prefix(maxInput))
        let sent =
            bytes.isEmpty
            ? 0 : bytes.withUnsafeBytes { send(pair[0], $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
        guard sent == bytes.count else {
            outcome.problems.append("could not buffer \(bytes.count) bytes (sent \(sent), errno \(errno))")
            return outcome
        }
        shutdown(pair[0], Int32(SHUT_WR))
        while readOne(from: pair[1], into: &outcome) {}
        return outcome
    }

    /// Reads, decodes and parses one frame; false once the agent would close the connection.
    private static func readOne(from fd: Int32, into outcome: inout FuzzOutcome) -> Bool {
        var payload: [UInt8]
        do {
            payload = try FrameIO.readFrame(from: fd, maxLength: Wire.maxRequestFrame, deadline: .now + readDeadline)
        } catch {
            switch error {
            case .closed, .truncated, .emptyFrame, .frameTooLarge: break
            default: outcome.problems.append("readFrame on buffered bytes: \(error)")
            }
            return false
        }
        outcome.frames += 1
        let copy = payload
        let request: Request
        do {
            request = try Request.decode(wiping: &payload)
        } catch {
            if payload.contains(where: { $0 != 0 }) { outcome.problems.append("decode(wiping:) left bytes unwiped") }
            switch error {
            case .unknownOpcode: return true  // answered with errSecUnimplemented; the connection stays
            case .unsupportedVersion, .malformed, .truncated: return false
            default:
                outcome.problems.append("Request.decode: unexpected \(error)")
                return false
            }
        }
        if payload.contains(where: { $0 != 0 }) { outcome.problems.append("decode(wiping:) left bytes unwiped") }
        outcome.requests += 1
        checkRoundTrip(request, payload: copy, into: &outcome)
        outcome.parsed += ParserTarget.parse(request, into: &outcome)
        request.wipeItemData()
        return true
    }

    /// A decoded request encodes to bytes that decode again, to the same bytes, and as many as were
    /// decoded (only the order of dictionary keys may differ: any order decodes, encoders sort).
    private static func checkRoundTrip(_ request: Request, payload: [UInt8], into outcome: inout FuzzOutcome) {
        let canonical = request.encode()
        do {
            let again = try Request.decode(canonical)
            if again.encode() != canonical { outcome.problems.append("\(request): re-encoding is not stable") }
        } catch {
            outcome.problems.append("\(request): its own encoding does not decode: \(error)")
        }
        if canonical.count != payload.count {
            outcome.problems.append("\(request): \(payload.count) bytes decoded, \(canonical.count) re-encoded")
        }
    }
}

/// What one fuzz input did; `problems` empty is a pass.
package struct FuzzOutcome: Sendable {
    /// Frames read whole.
    package var frames = 0
    /// Payloads decoded as requests.
    package var requests = 0
    /// SecItem dictionaries the parser accepted.
    package var parsed = 0
    /// What went wrong, one line each (never the input's bytes: a fuzz input may be anything).
    package var problems: [String] = []

    package init() {}
}
