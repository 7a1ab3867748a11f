import LatchkeySystem

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Secret bytes (passwords, derived keys, class keys) in storage that is locked in memory where the
/// limit allows and wiped over its whole capacity when the last reference goes away.
///
/// A reference type on purpose: copying a `SecretBytes` value copies the reference, never the secret,
/// so there is exactly one buffer to wipe. `description` is redacted so a secret cannot reach a log
/// through string interpolation.
public final class SecretBytes: @unchecked Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    private let pointer: UnsafeMutableRawPointer
    private let capacity: Int
    /// Number of secret bytes.
    public let count: Int
    private let locked: Bool

    /// Zero-filled secret storage of `count` bytes.
    public init(count: Int) {
        precondition(count >= 0, "negative secret length")
        self.count = count
        (pointer, capacity, locked) = LockedArena.shared.allocate(byteCount: max(count, 1))
        if !locked { SecretBytes.noteMlockFailure() }
    }

    /// Copies `bytes` into secret storage. The caller remains responsible for wiping its own copy.
    public convenience init<C: Collection>(copying bytes: C) where C.Element == UInt8 {
        self.init(count: bytes.count)
        var index = 0
        for byte in bytes {
            pointer.storeBytes(of: byte, toByteOffset: index, as: UInt8.self)
            index += 1
        }
    }

    /// Copies `bytes` into secret storage and wipes the source array.
    public convenience init(consuming bytes: inout [UInt8]) {
        self.init(copying: bytes)
        SecretBytes.wipe(&bytes)
    }

    deinit {
        SecretBytes.wipe(pointer, count: capacity)
        LockedArena.shared.deallocate(pointer, capacity: capacity)
    }

    /// Read access to the secret bytes. Do not let the buffer escape the closure.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    /// Write access to the secret bytes, for filling freshly allocated storage.
    public func withUnsafeMutableBytes<R>(_ body: (UnsafeMutableRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeMutableRawBufferPointer(start: pointer, count: count))
    }

    /// Constant-time comparison (time depends on the lengths only).
    public func constantTimeEquals(_ other: SecretBytes) -> Bool {
        guard count == other.count else { return false }
        return withUnsafeBytes { a in
            other.withUnsafeBytes { b in SecretBytes.constantTimeEquals(a, b) }
        }
    }

    /// Constant-time comparison of two equal-length buffers; false when the lengths differ.
    public static func constantTimeEquals(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        guard a.count == b.count else { return false }
        var diff: UInt8 = 0
        for i in 0..<a.count { diff |= a[i] ^ b[i] }
        return diff == 0
    }

    /// A copy of the secret as a plain array, for the few places that must hand bytes to code that
    /// cannot take `SecretBytes` (test vectors, wire encoding). The caller must wipe it.
    public func unsafeCopyToArray() -> [UInt8] {
        withUnsafeBytes { Array($0) }
    }

    public var description: String { "SecretBytes(\(count) bytes, redacted)" }
    public var debugDescription: String { description }

    /// Overwrites `count` bytes at `pointer` with zeros in a way the optimiser cannot remove.
    public static func wipe(_ pointer: UnsafeMutableRawPointer, count: Int) {
        guard count > 0 else { return }
        #if canImport(Glibc)
            explicit_bzero(pointer, count)
        #else
            memset_s(pointer, count, 0, count)
        #endif
    }

    /// Wipes an array's storage in place (and leaves it empty-valued but the same length).
    public static func wipe(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { buffer in
            if let base = buffer.baseAddress { wipe(base, count: buffer.count) }
        }
    }

    private static let mlockWarning = MlockWarning()

    private static func noteMlockFailure() {
        mlockWarning.noteOnce()
    }
}

/// Remembers whether `mlock` has failed, so the agent can warn once at start-up rather than per key.
private final class MlockWarning: Sendable {
    private let failed = Locked(false)
    func noteOnce() {
        failed.withLock { $0 = true }
    }
    var hasFailed: Bool {
        failed.withLock { $0 }
    }
}

extension SecretBytes {
    /// True once any secret could not be locked in memory (RLIMIT_MEMLOCK too small).
    public static var mlockHasFailed: Bool { mlockWarning.hasFailed }
}
