import Foundation
import LatchkeySecrets

#if canImport(Glibc)
    import Glibc
#endif

/// Reading the files `import` takes. They may hold private keys, so they are read straight into
/// wiping storage, never into `Data`.
///
/// Hand-written rather than LatchkeySystem's `Files.read`, which fills a plain array: here every buffer is
/// `SecretBytes`, grown under the cap. A symbolic link is followed, as the user named the file.
enum InputFile {
    /// Largest file accepted: a PKCS#12 file (LatchkeyCrypto's cap) or a PEM bundle of many
    /// certificates is far smaller.
    static let maximumSize = 16 << 20

    static func read(_ path: String) throws(InputFailure) -> SecretBytes {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw InputFailure("cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            throw InputFailure("cannot read \(path): \(String(cString: strerror(errno)))")
        }
        guard (info.st_mode & S_IFMT) != S_IFDIR else { throw InputFailure("\(path) is a directory") }
        guard Int(info.st_size) <= maximumSize else {
            throw InputFailure("\(path) is larger than \(maximumSize >> 20) MiB; it is not a certificate or key file")
        }
        // Pipes and process substitutions report size 0: grow as needed, up to the cap.
        var buffer = SecretBytes(count: max(Int(info.st_size), 4096) + 1)
        var count = 0
        while true {
            if count == buffer.count {
                guard buffer.count <= maximumSize else {
                    throw InputFailure(
                        "\(path) is larger than \(maximumSize >> 20) MiB; it is not a certificate or key file")
                }
                buffer = copy(buffer, count: count, capacity: min(buffer.count * 2, maximumSize + 1))
            }
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + count, $0.count - count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw InputFailure("cannot read \(path): \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            count += n
        }
        guard count > 0 else { throw InputFailure("\(path) is empty") }
        return copy(buffer, count: count, capacity: count)
    }

    /// The first `count` bytes of `source` in new storage of `capacity` bytes.
    private static func copy(_ source: SecretBytes, count: Int, capacity: Int) -> SecretBytes {
        let target = SecretBytes(count: capacity)
        target.withUnsafeMutableBytes { to in
            source.withUnsafeBytes { from in
                to.copyMemory(from: UnsafeRawBufferPointer(rebasing: from[0..<count]))
            }
        }
        return target
    }
}

/// Writing what `export` produces, to a file or to standard output.
enum OutputFile {
    /// Writes `bytes` to `path`, or to standard output when `path` is nil.
    ///
    /// - Parameters:
    ///   - secret: the bytes include a private key: a file is created with mode 0600, and an existing
    ///     file is truncated and set to 0600 before anything is written, so the secret is never in a
    ///     file that others can read.
    ///   - binary: DER or PKCS#12, which is refused on a terminal.
    static func write(_ bytes: SecretBytes, to path: String?, secret: Bool, binary: Bool) throws(InputFailure) {
        guard let path else {
            if binary && isatty(STDOUT_FILENO) == 1 {
                throw InputFailure("refusing to write binary data to a terminal; use -o FILE or redirect the output")
            }
            try writeAll(STDOUT_FILENO, bytes, what: "standard output")
            return
        }
        // O_NOFOLLOW: a symbolic link planted at the path could send a private key elsewhere.
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, secret ? 0o600 : 0o644)
        guard fd >= 0 else { throw InputFailure("cannot create \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        if secret {
            guard fchmod(fd, 0o600) == 0 else {
                throw InputFailure("cannot make \(path) private (mode 0600): \(String(cString: strerror(errno)))")
            }
        }
        try writeAll(fd, bytes, what: path)
        guard fsync(fd) == 0 || errno == EINVAL else {
            throw InputFailure("cannot write \(path): \(String(cString: strerror(errno)))")
        }
    }

    private static func writeAll(_ fd: Int32, _ bytes: SecretBytes, what: String) throws(InputFailure) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw InputFailure("cannot write \(what): \(String(cString: strerror(errno)))") }
            offset += n
        }
    }
}
