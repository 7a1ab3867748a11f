import LatchkeySystem
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// `O_PATH` (open a name to stat it or walk from it, needing only search permission, and with
/// `O_NOFOLLOW` the symbolic link itself), which Glibc's Swift module leaves out (it is `_GNU_SOURCE`).
/// The value is asm-generic/fcntl.h's, which every architecture Swift runs on under Linux uses.
private let O_PATH: Int32 = 0o10_000_000

/// Why a directory, an application file or an executable does not count: the rule it breaks, and the
/// path that breaks it.
package enum TrustProblem: Error, Sendable, Equatable, CustomStringConvertible {
    /// Nothing is there (ENOENT): for a directory of application files, simply none installed.
    case missing(String)
    case symbolicLink(String)
    case notOwnedByRoot(String, uid: UInt32)
    /// Writable by its group or by others (mode bits 0o022; an ACL granting write shows in the group
    /// bits too, as its mask).
    case writableByOthers(String, mode: UInt32)
    case notDirectory(String)
    case notRegularFile(String)
    case tooLarge(String, bytes: Int64, limit: Int)
    /// An executable that is a script (`#!`): the kernel reports its interpreter as what runs.
    case script(String)
    case system(String, Errno)

    package var description: String {
        switch self {
        case .missing(let path): "\(Printable.escaped(path)) does not exist"
        case .symbolicLink(let path):
            "\(Printable.escaped(path)) is a symbolic link (name the file itself, without links)"
        case .notOwnedByRoot(let path, let uid): "\(Printable.escaped(path)) is owned by uid \(uid), not root"
        case .writableByOthers(let path, let mode):
            "\(Printable.escaped(path)) is writable by others than root (mode \(String(mode, radix: 8)))"
        case .notDirectory(let path): "\(Printable.escaped(path)) is not a directory"
        case .notRegularFile(let path): "\(Printable.escaped(path)) is not a regular file"
        case .tooLarge(let path, let bytes, let limit):
            "\(Printable.escaped(path)) is larger than \(limit) bytes (\(bytes))"
        case .script(let path):
            "\(Printable.escaped(path)) is a script (#!): a process running it runs its interpreter, which is what "
                + "the kernel names; name a compiled program"
        case .system(let path, let errno): "\(Printable.escaped(path)): \(errno)"
        }
    }
}

/// The ownership rule of application files and of the executables they name (docs/APPLICATIONS.md
/// "Ownership"): a path counts only if it and every directory above it are owned by root and writable
/// by root only, and none of them is a symbolic link. Then only root can change what the path names,
/// so what was checked at load stays true until root changes it.
///
/// Every walk starts at `/` and opens one component at a time relative to the last (`openat` with
/// `O_NOFOLLOW`), checking each on its open descriptor (`fstat`): the chain checked is the chain used,
/// with no window between a check of a name and the use of it.
enum TrustedPaths {
    /// What one path looked like when it was checked: enough to tell later that it changed
    /// (`ApplicationsFingerprint`).
    struct Observation: Sendable, Equatable {
        var path: String
        var state: FileState?
        /// Whether its content matters (an applications.d directory's entries, an application file's
        /// text), or only which file it is, its owner and its mode (the directories on the way, an
        /// executable). `/etc` or `/usr/bin` change all the time; their owner and mode do not.
        var content = false

        /// Whether what is at `path` now is what was observed, as far as it matters.
        func isUnchanged() -> Bool {
            let now = FileState(path: path)
            guard let state, let now else { return state == nil && now == nil }
            return content ? now == state : now.isSameFile(as: state)
        }
    }

    /// Opens the directory at `path` for reading its entries, after checking it and every directory
    /// above it. Records every component it looked at in `observed`.
    static func openDirectory(_ path: String, observed: inout [Observation]) throws(TrustProblem) -> FileDescriptor {
        let parent = try walkToParent(of: path, observed: &observed)
        defer { try? parent.fd.close() }
        let node = try openComponent(parent.name, in: parent.fd, path: path, observed: &observed)
        defer { try? node.close() }
        observed[observed.count - 1].content = true  // an entry added or removed changes its times
        let info = try stat(node, path)
        guard info.type == .directory else { throw .notDirectory(path) }
        try checkOwnership(info, path)
        // The O_PATH descriptor cannot list entries; "." through it is the same directory, not a name
        // that could have been swapped since the check.
        let fd = openat(node.rawValue, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw .system(path, Errno(rawValue: errno)) }
        return FileDescriptor(rawValue: fd)
    }

    /// The device and inode of the executable at `path`, after checking it (a regular file) and every
    /// directory above it.
    static func executable(_ path: String, observed: inout [Observation]) throws(TrustProblem) -> (UInt64, UInt64) {
        let parent = try walkToParent(of: path, observed: &observed)
        defer { try? parent.fd.close() }
        let node = try openComponent(parent.name, in: parent.fd, path: path, observed: &observed)
        defer { try? node.close() }
        let info = try stat(node, path)
        guard info.type == .regular else { throw .notRegularFile(path) }
        try checkOwnership(info, path)
        let identity = (UInt64(info.deviceID.rawValue), UInt64(info.inode.rawValue))
        if startsWithShebang(parent.name, in: parent.fd, identity: identity) { throw .script(path) }
        return identity
    }

    /// Whether the file `name` in `directory` (the file whose device and inode are `identity`) starts
    /// with `#!`. A process that runs a script runs its interpreter, and `/proc/PID/exe` names the
    /// interpreter: an `Executable=` naming a script could never match, and the one that would (the
    /// interpreter) would be every script's. False when the file cannot be read (mode 0711): the
    /// kernel can run it, the agent cannot tell.
    private static func startsWithShebang(
        _ name: String, in directory: FileDescriptor, identity: (UInt64, UInt64)
    ) -> Bool {
        let raw = openat(directory.rawValue, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard raw >= 0 else { return false }
        let fd = FileDescriptor(rawValue: raw)
        defer { try? fd.close() }
        // Only root can replace the file (checked), but read the one that was checked or nothing.
        guard let info = try? fd.stat(), info.type == .regular,
            (UInt64(info.deviceID.rawValue), UInt64(info.inode.rawValue)) == identity
        else { return false }
        return (try? fd.readAll(upTo: 2)) == Array("#!".utf8)
    }

    /// The content of the file `name` in the checked directory `directory` (whose path is `path`), at
    /// most `limit` bytes: a regular file, not a symbolic link, owned by root and writable by root only.
    static func readFile(
        _ name: String, in directory: FileDescriptor, path: String, limit: Int
    ) throws(TrustProblem) -> (bytes: [UInt8], state: FileState) {
        // Look before opening, so that a FIFO or a device node is never opened (O_NONBLOCK below is the
        // second guard); the fstat after opening is the check that counts.
        let before: Stat
        do {
            before = try FilePath(name).stat(relativeTo: directory, flags: [.symlinkNoFollow])
        } catch {
            throw .system(path, error)
        }
        if before.type == .symbolicLink { throw .symbolicLink(path) }
        guard before.type == .regular else { throw .notRegularFile(path) }
        let raw = openat(directory.rawValue, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard raw >= 0 else {
            throw errno == ELOOP ? .symbolicLink(path) : .system(path, Errno(rawValue: errno))
        }
        let fd = FileDescriptor(rawValue: raw)
        defer { try? fd.close() }
        let info = try stat(fd, path)
        guard info.type == .regular else { throw .notRegularFile(path) }
        try checkOwnership(info, path)
        guard info.size <= Int64(limit) else { throw .tooLarge(path, bytes: info.size, limit: limit) }
        let bytes: [UInt8]
        do {
            bytes = try fd.readAll(upTo: limit + 1)
        } catch {
            throw .system(path, error)
        }
        // It grew between the fstat and the read: only root can write it, but keep the cap a cap.
        guard bytes.count <= limit else { throw .tooLarge(path, bytes: Int64(bytes.count), limit: limit) }
        return (bytes, FileState(info))
    }

    /// Opens `/` and then each directory of `path` but the last component, checking each; returns the
    /// last directory's descriptor (O_PATH) and the last component's name.
    private static func walkToParent(
        of path: String, observed: inout [Observation]
    ) throws(TrustProblem) -> (fd: FileDescriptor, name: String) {
        guard ApplicationNames.isNormalizedAbsolutePath(path) else { throw .system(path, .invalidArgument) }
        let rootFD = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)
        guard rootFD >= 0 else { throw .system("/", Errno(rawValue: errno)) }
        var current = FileDescriptor(rawValue: rootFD)
        do throws(TrustProblem) {
            let rootInfo = try stat(current, "/")
            observed.append(Observation(path: "/", state: FileState(rootInfo)))
            try checkOwnership(rootInfo, "/")
            let components = path.dropFirst().split(separator: "/").map(String.init)
            var prefix = ""
            for component in components.dropLast() {
                prefix += "/" + component
                let next = try openComponent(component, in: current, path: prefix, observed: &observed)
                try? current.close()
                current = next
                let info = try stat(current, prefix)
                guard info.type == .directory else { throw TrustProblem.notDirectory(prefix) }
                try checkOwnership(info, prefix)
            }
            return (current, components[components.count - 1])
        } catch {
            try? current.close()
            throw error
        }
    }

    /// Opens `name` in `directory` without following it if it is a symbolic link (O_PATH | O_NOFOLLOW
    /// opens the link itself), refusing a link, and records what it found.
    private static func openComponent(
        _ name: String, in directory: FileDescriptor, path: String, observed: inout [Observation]
    ) throws(TrustProblem) -> FileDescriptor {
        let raw = openat(directory.rawValue, name, O_PATH | O_NOFOLLOW | O_CLOEXEC)
        guard raw >= 0 else {
            let error = Errno(rawValue: errno)
            observed.append(Observation(path: path, state: nil))
            throw error == .noSuchFileOrDirectory ? .missing(path) : .system(path, error)
        }
        let fd = FileDescriptor(rawValue: raw)
        do throws(TrustProblem) {
            let info = try stat(fd, path)
            observed.append(Observation(path: path, state: FileState(info)))
            if info.type == .symbolicLink { throw TrustProblem.symbolicLink(path) }
            return fd
        } catch {
            try? fd.close()
            throw error
        }
    }

    private static func stat(_ fd: FileDescriptor, _ path: String) throws(TrustProblem) -> Stat {
        do {
            return try fd.stat()
        } catch {
            throw .system(path, error)
        }
    }

    private static func checkOwnership(_ info: Stat, _ path: String) throws(TrustProblem) {
        guard info.userID.rawValue == 0 else { throw .notOwnedByRoot(path, uid: info.userID.rawValue) }
        let mode = UInt32(info.mode.rawValue) & 0o7777
        guard mode & 0o022 == 0 else { throw .writableByOthers(path, mode: mode) }
    }
}

/// What `lstat` says about a path, as far as it shows a change: a new file (device, inode), a write
/// (size, modification time), a change of owner or mode or any other change to the inode (status
/// change time, which only the kernel sets).
struct FileState: Sendable, Equatable {
    var device: UInt64
    var inode: UInt64
    var mode: UInt32
    var owner: UInt32
    var size: Int64
    var modified: timespec
    var changed: timespec

    init(_ info: Stat) {
        device = UInt64(info.deviceID.rawValue)
        inode = UInt64(info.inode.rawValue)
        mode = UInt32(info.mode.rawValue)
        owner = info.userID.rawValue
        size = info.size
        modified = info.st_mtim
        changed = info.st_ctim
    }

    /// The state of what is at `path` now, not following a symbolic link; nil when nothing is.
    init?(path: String) {
        guard let info = try? FilePath(path).stat(followTargetSymlink: false) else { return nil }
        self.init(info)
    }

    /// The same file, owner and mode (its content and times aside).
    func isSameFile(as other: FileState) -> Bool {
        device == other.device && inode == other.inode && mode == other.mode && owner == other.owner
    }

    static func == (lhs: FileState, rhs: FileState) -> Bool {
        lhs.device == rhs.device && lhs.inode == rhs.inode && lhs.mode == rhs.mode && lhs.owner == rhs.owner
            && lhs.size == rhs.size && lhs.modified.tv_sec == rhs.modified.tv_sec
            && lhs.modified.tv_nsec == rhs.modified.tv_nsec && lhs.changed.tv_sec == rhs.changed.tv_sec
            && lhs.changed.tv_nsec == rhs.changed.tv_nsec
    }
}
