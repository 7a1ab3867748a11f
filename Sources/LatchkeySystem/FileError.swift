import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// Why a file helper of this module failed, and on which path.
package struct FileError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What went wrong.
    package enum Reason: Equatable, Sendable {
        /// A system call failed (`.tooManySymbolicLinkLevels`, ELOOP, is a symbolic link refused by
        /// `O_NOFOLLOW`).
        case system(Errno)
        /// The path names a directory, a FIFO, a device or a socket where a regular file was required.
        case notRegularFile
        /// The file belongs to another user (`uid`) than the one required.
        case wrongOwner(uid: UInt32)
    }

    /// The path the failing step worked on (for a replacement: the temporary file, the target, or its
    /// directory).
    package var path: FilePath
    package var reason: Reason

    package init(_ path: FilePath, _ reason: Reason) {
        self.path = path
        self.reason = reason
    }

    /// The error number, when a system call failed.
    package var errno: Errno? {
        if case .system(let errno) = reason { errno } else { nil }
    }

    package var description: String {
        switch reason {
        case .system(let errno): "\(path): \(errno)"
        case .notRegularFile: "\(path) is not a regular file"
        case .wrongOwner(let uid): "\(path) is owned by uid \(uid)"
        }
    }
}

extension Errno {
    /// The calling thread's `errno`, right after a failed system call.
    static var current: Errno { Errno(rawValue: Glibc.errno) }
}

/// Runs a swift-system call, whose errors are always `Errno` but untyped, with a typed error.
func systemCall<T>(_ body: () throws -> T) throws(Errno) -> T {
    do {
        return try body()
    } catch let errno as Errno {
        throw errno
    } catch {
        throw Errno.ioError  // not reached: swift-system throws only Errno
    }
}
