import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// The entry names of an open directory, as bytes (a name need not be UTF-8), sorted so that
/// everything that depends on their order is the same on every run whatever order the file system
/// lists them in.
enum DirectoryListing {
    /// The names in `directory` other than `.` and `..`; nil if there are more than `limit` (the
    /// caller then ignores the directory as a whole: taking the first `limit` would depend on the
    /// file system's order).
    static func names(in directory: FileDescriptor, limit: Int) throws(Errno) -> [[UInt8]]? {
        // fdopendir takes over the descriptor it is given; give it a duplicate so the caller's stays open.
        let duplicate = fcntl(directory.rawValue, F_DUPFD_CLOEXEC, 0)
        guard duplicate >= 0 else { throw Errno(rawValue: errno) }
        guard let stream = fdopendir(duplicate) else {
            let error = Errno(rawValue: errno)
            close(duplicate)
            throw error
        }
        defer { closedir(stream) }
        var names: [[UInt8]] = []
        while true {
            errno = 0
            guard let entry = readdir(stream) else {
                if errno != 0 { throw Errno(rawValue: errno) }
                break
            }
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                Array(raw.prefix { $0 != 0 })
            }
            if name == [46] || name == [46, 46] { continue }
            guard names.count < limit else { return nil }
            names.append(name)
        }
        return names.sorted { $0.lexicographicallyPrecedes($1) }
    }
}
