import LatchkeySecrets
import LatchkeyWire

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Blocking frame I/O on a connected stream socket. The caller owns the descriptor; nothing here
/// closes it.
///
/// A frame is a u32 big-endian payload length followed by the payload. Both directions honour an
/// optional deadline using `poll()`, so a client can never hang on a stuck or malicious agent (the
/// public library promises to fail within a bounded time). Works on blocking and non-blocking sockets.
///
/// Hand-written on raw descriptors rather than swift-system's `FileDescriptor`: frames go out with `send(2)`
/// flags (`MSG_NOSIGNAL`, `MSG_DONTWAIT` under a deadline) and wait in `poll(2)`, which it does not offer,
/// and a payload buffer is allocated only once its length has passed the cap.
package enum FrameIO {
    /// Writes one frame: the length prefix, then `payload`. Handles partial writes and EINTR; sends
    /// with MSG_NOSIGNAL so a vanished peer is `.io(errno: EPIPE)`, not a SIGPIPE that kills us.
    ///
    /// - Parameters:
    ///   - maxLength: the largest payload to send; pass the peer's cap (`Wire.maxRequestFrame` from a
    ///     client) to fail locally instead of being disconnected. nil means only the u32 limit applies.
    ///   - deadline: fail with `.timedOut` if the peer has not accepted the whole frame by then.
    /// - Throws: `.emptyFrame`, `.frameTooLarge`, `.io`, `.timedOut`.
    package static func writeFrame(
        _ payload: [UInt8], to fd: Int32, maxLength: Int? = nil,
        deadline: ContinuousClock.Instant? = nil
    ) throws(WireError) {
        let limit = min(maxLength ?? Int(UInt32.max), Int(UInt32.max))
        guard !payload.isEmpty else { throw .emptyFrame }
        guard payload.count <= limit else { throw .frameTooLarge(payload.count, limit: limit) }
        // One buffer, one send: a request/response round trip costs two system calls, not four.
        // The payload may hold a secret, so the combined copy is wiped once sent.
        let n = UInt32(payload.count)
        var frame: [UInt8] = []
        frame.reserveCapacity(Wire.frameHeaderLength + payload.count)
        frame += [UInt8(n >> 24), UInt8((n >> 16) & 0xFF), UInt8((n >> 8) & 0xFF), UInt8(n & 0xFF)]
        frame += payload
        defer { SecretBytes.wipe(&frame) }
        // Array.withUnsafeBytes only rethrows untyped errors, hence the Result round trip.
        try frame.withUnsafeBytes { raw in
            Result { () throws(WireError) in try sendAll(raw, fd: fd, deadline: deadline) }
        }.get()
    }

    /// Reads one frame and returns its payload.
    ///
    /// The length is checked against `maxLength` (and must be non-zero) before the payload buffer is
    /// allocated; the buffer is then allocated once at its exact size and filled in place, so the
    /// returned array is the only copy of any secret in it. If reading fails midway the partial buffer
    /// is wiped. Wiping the returned payload is the caller's job (`Request.decode(wiping:)` does it).
    ///
    /// - Parameters:
    ///   - maxLength: `Wire.maxRequestFrame` in the agent, `Wire.maxResponseFrame` in clients.
    ///   - deadline: fail with `.timedOut` if the whole frame has not arrived by then.
    ///   - awaitingReply: the peer has only just been sent a request, so nothing can have arrived yet:
    ///     wait for data before the first read instead of trying a read that would come back empty
    ///     (one system call fewer per round trip).
    /// - Throws: `.closed` (EOF before the first byte), `.truncated` (EOF inside the frame),
    ///   `.emptyFrame`, `.frameTooLarge`, `.io`, `.timedOut`.
    package static func readFrame(
        from fd: Int32, maxLength: Int, deadline: ContinuousClock.Instant? = nil,
        awaitingReply: Bool = false
    ) throws(WireError) -> [UInt8] {
        if awaitingReply, deadline != nil {
            if !spinBriefly(fd: fd) { try wait(fd: fd, for: Int16(POLLIN), deadline: deadline) }
        }
        var header = [UInt8](repeating: 0, count: Wire.frameHeaderLength)
        let got = try header.withUnsafeMutableBytes { raw in
            Result { () throws(WireError) in try receiveAll(raw, fd: fd, deadline: deadline) }
        }.get()
        if got == 0 { throw .closed }
        if got < Wire.frameHeaderLength { throw .truncated }
        let length = header.reduce(0) { $0 << 8 | Int($1) }
        if length == 0 { throw .emptyFrame }
        if length > maxLength { throw .frameTooLarge(length, limit: maxLength) }

        var payload = [UInt8](repeating: 0, count: length)
        let result = payload.withUnsafeMutableBytes { raw in
            Result { () throws(WireError) -> Int in try receiveAll(raw, fd: fd, deadline: deadline) }
        }
        switch result {
        case .success(let n) where n == length:
            return payload
        case .success:
            SecretBytes.wipe(&payload)
            throw .truncated
        case .failure(let error):
            SecretBytes.wipe(&payload)
            throw error
        }
    }

    // MARK: Internals

    #if canImport(Glibc)
        private static let noSignal = Int32(MSG_NOSIGNAL)
    #else
        // Darwin has no MSG_NOSIGNAL; there the socket owner sets SO_NOSIGPIPE. Linux is the target.
        private static let noSignal: Int32 = 0
    #endif

    private static func sendAll(
        _ buffer: UnsafeRawBufferPointer, fd: Int32,
        deadline: ContinuousClock.Instant?
    ) throws(WireError) {
        // With a deadline every send is non-blocking: a blocking send of a large buffer could sleep past
        // the deadline even after poll() reported some room.
        let flags = noSignal | (deadline == nil ? 0 : Int32(MSG_DONTWAIT))
        var offset = 0
        while offset < buffer.count {
            let n = send(fd, buffer.baseAddress! + offset, buffer.count - offset, flags)
            if n > 0 {
                offset += n
                continue
            }
            let e = errno
            switch e {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: try wait(fd: fd, for: Int16(POLLOUT), deadline: deadline)
            default: throw .io(errno: e)
            }
        }
    }

    /// Fills `buffer` unless EOF comes first; returns the number of bytes read.
    private static func receiveAll(
        _ buffer: UnsafeMutableRawBufferPointer, fd: Int32,
        deadline: ContinuousClock.Instant?
    ) throws(WireError) -> Int {
        let flags = deadline == nil ? 0 : Int32(MSG_DONTWAIT)
        var offset = 0
        while offset < buffer.count {
            let n = recv(fd, buffer.baseAddress! + offset, buffer.count - offset, flags)
            if n > 0 {
                offset += n
                continue
            }
            if n == 0 { return offset }
            let e = errno
            switch e {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: try wait(fd: fd, for: Int16(POLLIN), deadline: deadline)
            default: throw .io(errno: e)
            }
        }
        return offset
    }

    /// Waits until `fd` is ready for `events` (or reports an error or hang-up, which the next send or
    /// recv turns into the right error) or the deadline passes.
    /// How long a client polls for a reply before it sleeps in `poll`.
    static let replySpin: Duration = .microseconds(60)

    /// Polls (without sleeping, yielding the CPU between tries) for up to `replySpin`; true once data is
    /// there. Most replies take the agent a few tens of microseconds: catching them here saves the
    /// sleep and the wake-up, which on a virtual machine cost about as much again.
    private static func spinBriefly(fd: Int32) -> Bool {
        let end = ContinuousClock.now + replySpin
        repeat {
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if poll(&pfd, 1, 0) > 0 { return true }
            sched_yield()
        } while ContinuousClock.now < end
        return false
    }

    private static func wait(fd: Int32, for events: Int16, deadline: ContinuousClock.Instant?) throws(WireError) {
        while true {
            var timeout: Int32 = -1
            if let deadline {
                timeout = milliseconds(until: deadline)
                if timeout == 0, ContinuousClock.now >= deadline { throw .timedOut }
            }
            var pfd = pollfd(fd: fd, events: events, revents: 0)
            let r = poll(&pfd, 1, timeout)
            if r > 0 { return }
            if r == 0 { continue }  // re-check the clock: poll may wake a little early
            let e = errno
            if e != EINTR { throw .io(errno: e) }
        }
    }

    /// Whole milliseconds until `deadline`, rounded up (so poll never wakes before it) and clamped to
    /// poll's range; 0 once it has passed.
    private static func milliseconds(until deadline: ContinuousClock.Instant) -> Int32 {
        let remaining = ContinuousClock.now.duration(to: deadline)
        guard remaining > .zero else { return 0 }
        let (seconds, attoseconds) = remaining.components
        let ms = seconds.multipliedReportingOverflow(by: 1000)
        guard !ms.overflow else { return Int32.max }
        let total = ms.partialValue + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return Int32(clamping: total)
    }
}
