#if canImport(Glibc)
import Glibc
#endif
import LatchkeyModel

/// Enough of `stat` to tell that a file was replaced (an atomic rename gives a new inode).
struct FileIdentity: Equatable {
    var device: UInt64, inode: UInt64, size: Int64, modifiedSeconds: Int, modifiedNanoseconds: Int

    init?(path: String) {
        var st = stat()
        guard lstat(path, &st) == 0 else { return nil }
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
        size = Int64(st.st_size)
        modifiedSeconds = st.st_mtim.tv_sec
        modifiedNanoseconds = st.st_mtim.tv_nsec
    }
}

/// The first line of a small text file (at most 512 bytes read), or nil if there is none.
func firstLine(of path: String) -> String? {
    let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var info = stat()
    guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
    var buffer = [UInt8](repeating: 0, count: 512)
    let count = read(fd, &buffer, buffer.count)
    guard count > 0 else { return nil }
    let line = buffer[0..<count].split(separator: 10, omittingEmptySubsequences: false).first ?? []
    let text = String(decoding: line, as: UTF8.self)
    return text.isEmpty ? "the login password and the keychain password differ" : text
}

func fileExists(_ path: String) -> Bool {
    var st = stat()
    return lstat(path, &st) == 0
}

/// Creates `path` and its parents with mode 0700 (existing directories are left as they are).
func makeDirectory(_ path: String) throws(SecError) {
    var prefix = path.hasPrefix("/") ? "" : "."
    for component in path.split(separator: "/", omittingEmptySubsequences: true) {
        prefix += "/" + component
        if mkdir(prefix, 0o700) != 0 && errno != EEXIST {
            throw SecError(SecStatus.io, "cannot create directory \(prefix): \(String(cString: strerror(errno)))")
        }
    }
}
