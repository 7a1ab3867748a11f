import Foundation  // Thread, for the concurrent writer; tests only, the module itself does not use it
import Glibc
import LatchkeyTransport
import XCTest

@testable import LatchkeyWire

final class FrameIOTests: XCTestCase {
    private var fds: [Int32] = []

    /// A connected AF_UNIX stream pair: [a, b]. Closed in tearDown unless a test closed one already.
    private func socketPair() throws -> (Int32, Int32) {
        var pair: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0 else {
            throw WireError.io(errno: errno)
        }
        fds += pair
        return (pair[0], pair[1])
    }

    private func closeNow(_ fd: Int32) {
        close(fd)
        fds.removeAll { $0 == fd }
    }

    override func tearDown() {
        for fd in fds { close(fd) }
        fds = []
    }

    private func sendRaw(_ bytes: [UInt8], to fd: Int32) {
        let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        XCTAssertEqual(n, bytes.count)
    }

    func testFrameRoundTripAndSequence() throws {
        let (a, b) = try socketPair()
        let first = Request.hello.encode()
        let second = Request.unlock(password: secret("pw")).encode()
        try FrameIO.writeFrame(first, to: a)
        try FrameIO.writeFrame(second, to: a, maxLength: Wire.maxRequestFrame)
        XCTAssertEqual(try FrameIO.readFrame(from: b, maxLength: Wire.maxRequestFrame), first)
        XCTAssertEqual(
            try FrameIO.readFrame(from: b, maxLength: Wire.maxRequestFrame, deadline: .now + .seconds(5)), second)
    }

    /// A writer thread dribbles a frame a few bytes at a time; the reader must reassemble it.
    func testReaderReassemblesDribbledFrame() throws {
        let (a, b) = try socketPair()
        let payload = Response(status: 0, value: .data(Array(repeating: 0x5a, count: 300))).encode()
        let n = UInt32(payload.count)
        let frame = [UInt8(n >> 24), UInt8(n >> 16 & 0xff), UInt8(n >> 8 & 0xff), UInt8(n & 0xff)] + payload
        let writer = Thread {
            var offset = 0
            var chunk = 1
            while offset < frame.count {
                let end = min(offset + chunk, frame.count)
                _ = frame[offset..<end].withUnsafeBytes { send(a, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                offset = end
                chunk = chunk % 7 + 1
                usleep(200)
            }
        }
        writer.start()
        XCTAssertEqual(
            try FrameIO.readFrame(from: b, maxLength: Wire.maxResponseFrame, deadline: .now + .seconds(10)), payload)
    }

    /// An 8 MiB frame through a socket with a small send buffer: writeFrame must loop over partial
    /// writes, with and without a deadline, while a reader thread drains the other end.
    func testWriterHandlesPartialWrites() throws {
        for useDeadline in [false, true] {
            let (a, b) = try socketPair()
            var small: Int32 = 4096
            setsockopt(a, SOL_SOCKET, SO_SNDBUF, &small, socklen_t(MemoryLayout<Int32>.size))
            let payload = (0..<(8 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
            let received = LockedBox<[UInt8]?>(nil)
            let done = DispatchSemaphore(value: 0)
            let reader = Thread {
                received.set(try? FrameIO.readFrame(from: b, maxLength: Wire.maxResponseFrame))
                done.signal()
            }
            reader.start()
            try FrameIO.writeFrame(payload, to: a, deadline: useDeadline ? .now + .seconds(30) : nil)
            XCTAssertEqual(done.wait(timeout: .now() + 30), .success)
            XCTAssertTrue(received.get() == payload, "deadline: \(useDeadline)")
        }
    }

    func testEOFBeforeAnyByteIsClosed() throws {
        let (a, b) = try socketPair()
        closeNow(a)
        XCTAssertEqual(wireError { try FrameIO.readFrame(from: b, maxLength: 100) }, .closed)
    }

    func testEOFMidFrameIsTruncated() throws {
        // Inside the header...
        var (a, b) = try socketPair()
        sendRaw([0x00, 0x00], to: a)
        closeNow(a)
        XCTAssertEqual(wireError { try FrameIO.readFrame(from: b, maxLength: 100) }, .truncated)
        // ...and inside the payload, with and without a deadline.
        for deadline in [nil, ContinuousClock.now + .seconds(5)] {
            (a, b) = try socketPair()
            sendRaw([0x00, 0x00, 0x00, 0x64] + [UInt8](repeating: 1, count: 10), to: a)
            closeNow(a)
            XCTAssertEqual(wireError { try FrameIO.readFrame(from: b, maxLength: 100, deadline: deadline) }, .truncated)
        }
    }

    func testDeadlineGivesTimedOut() throws {
        let (a, b) = try socketPair()
        // Nothing at all arrives.
        var start = ContinuousClock.now
        XCTAssertEqual(
            wireError { try FrameIO.readFrame(from: b, maxLength: 100, deadline: .now + .milliseconds(150)) }, .timedOut
        )
        var elapsed = start.duration(to: .now)
        XCTAssertGreaterThanOrEqual(elapsed, .milliseconds(150))
        XCTAssertLessThan(elapsed, .seconds(3))
        // The header arrives, the payload never does.
        sendRaw([0x00, 0x00, 0x00, 0x10, 0x01], to: a)
        start = .now
        XCTAssertEqual(
            wireError { try FrameIO.readFrame(from: b, maxLength: 100, deadline: .now + .milliseconds(100)) }, .timedOut
        )
        elapsed = start.duration(to: .now)
        XCTAssertLessThan(elapsed, .seconds(3))
        // A deadline already passed still fails promptly rather than blocking.
        XCTAssertEqual(
            wireError { try FrameIO.readFrame(from: a, maxLength: 100, deadline: .now - .seconds(1)) }, .timedOut)
    }

    /// A peer that never reads cannot make a writer with a deadline hang.
    func testWriteDeadlineGivesTimedOut() throws {
        let (a, _) = try socketPair()
        let start = ContinuousClock.now
        let big = [UInt8](repeating: 7, count: 16 << 20)
        XCTAssertEqual(wireError { try FrameIO.writeFrame(big, to: a, deadline: .now + .milliseconds(150)) }, .timedOut)
        XCTAssertLessThan(start.duration(to: .now), .seconds(3))
    }

    /// The cap is checked on the header alone: the reader neither waits for nor allocates the body.
    func testCapIsCheckedBeforeThePayload() throws {
        let (a, b) = try socketPair()
        sendRaw([0xff, 0xff, 0xff, 0xff], to: a)
        XCTAssertEqual(
            wireError { try FrameIO.readFrame(from: b, maxLength: Wire.maxRequestFrame, deadline: .now + .seconds(5)) },
            .frameTooLarge(0xffff_ffff, limit: Wire.maxRequestFrame))
        let justOver = UInt32(Wire.maxRequestFrame + 1)
        sendRaw(
            [UInt8(justOver >> 24), UInt8(justOver >> 16 & 0xff), UInt8(justOver >> 8 & 0xff), UInt8(justOver & 0xff)],
            to: a)
        XCTAssertEqual(
            wireError { try FrameIO.readFrame(from: b, maxLength: Wire.maxRequestFrame, deadline: .now + .seconds(5)) },
            .frameTooLarge(Wire.maxRequestFrame + 1, limit: Wire.maxRequestFrame))
        sendRaw([0, 0, 0, 0], to: a)
        XCTAssertEqual(
            wireError { try FrameIO.readFrame(from: b, maxLength: 100, deadline: .now + .seconds(5)) }, .emptyFrame)
    }

    func testWriterChecksItsOwnLimits() throws {
        let (a, _) = try socketPair()
        XCTAssertEqual(wireError { try FrameIO.writeFrame([], to: a) }, .emptyFrame)
        XCTAssertEqual(
            wireError { try FrameIO.writeFrame([1, 2, 3], to: a, maxLength: 2) }, .frameTooLarge(3, limit: 2))
    }

    /// Writing to a closed peer is EPIPE, not a SIGPIPE that kills the process.
    func testWriteToClosedPeerIsAnIOError() throws {
        let (a, b) = try socketPair()
        closeNow(b)
        XCTAssertEqual(wireError { try FrameIO.writeFrame([1], to: a) }, .io(errno: EPIPE))
        XCTAssertEqual(wireError { try FrameIO.readFrame(from: -1, maxLength: 10) }, .io(errno: EBADF))
    }

    /// Non-blocking descriptors work too: EAGAIN waits in poll() instead of failing.
    func testNonBlockingDescriptor() throws {
        let (a, b) = try socketPair()
        _ = fcntl(b, F_SETFL, fcntl(b, F_GETFL) | O_NONBLOCK)
        let writer = Thread {
            usleep(50_000)
            try? FrameIO.writeFrame([1, 2, 3], to: a)
        }
        writer.start()
        XCTAssertEqual(try FrameIO.readFrame(from: b, maxLength: 10), [1, 2, 3])
    }
}

/// A mutex-protected box so a reader thread can hand its result back under strict concurrency.
final class LockedBox<T>: @unchecked Sendable {
    private var value: T
    private let lock = NSLock()
    init(_ value: T) { self.value = value }
    func set(_ v: T) {
        lock.lock()
        value = v
        lock.unlock()
    }
    func get() -> T {
        lock.lock()
        defer { lock.unlock() }
        return value
    }
}
