import CLatchkeySystem
import LatchkeySystem

#if canImport(Glibc)
    import Glibc
#endif

/// Who a process is, as `/proc` tells it to the agent (docs/IDENTITY.md): the executable it runs, a
/// Flatpak application's id, a snap's name, and the reasons not to believe its executable.
///
/// Everything is read through one descriptor of `/proc/PID` opened once (`ProcessDirectory`), and the
/// caller's pidfd then confirms that the process was alive throughout: a pid is only a number, reused
/// once its process is reaped, and without that confirmation an exited caller could lend its pid, and
/// so another process's identity, to its connection. Each read is capped (the environment at
/// `environmentCap`, the Flatpak file at `FlatpakInfo.cap`), so no caller costs more than a few small
/// reads, whatever it puts in its environment.
package enum ProcessInspection {
    /// The longest executable path read (PATH_MAX), and room for the kernel's " (deleted)".
    static let executablePathCap = 4096 + 16
    /// `/proc/PID/status` is about 1.5 KiB; `Uid:` and `TracerPid:` come in its first lines.
    static let statusCap = 4096
    /// A longer environment is not read through: its caller gets `unreadable`, not an identity. A
    /// desktop session's is a few KiB; the cap bounds what one connection costs the accept thread.
    static let environmentCap = 256 * 1024
    /// Enough of an environment entry to recognise the names of `Environment.codeVariables`.
    static let entryHead = 32
    /// An AppArmor label (`snap.NAME.APP (enforce)`) is short; a longer one is no snap's.
    static let labelCap = 256

    /// Identifies the process `pid`, which `pidfd` names, running as `uid` (the peer's credentials).
    ///
    /// - Parameters:
    ///   - vantage: the namespaces and root the agent compares the process's with (its own).
    ///   - startedBy: when given (clock ticks since boot, as in `/proc/PID/stat`), a process that started
    ///     later cannot be the one meant (a bus client identified from its pid alone).
    package static func identify(
        pid: Int32, pidfd: Int32, uid: UInt32, vantage: Vantage = .agent, startedBy: UInt64? = nil
    ) -> CallerIdentity {
        var identity = CallerIdentity(uid: uid, pid: pid)
        guard let directory = ProcessDirectory(pid: pid) else {
            return unreadable(identity, "cannot open /proc/\(pid): \(String(cString: strerror(errno)))")
        }
        guard let status = directory.read("status", cap: statusCap), let fields = StatusFields(status.bytes) else {
            return unreadable(identity, "cannot read its status")
        }
        // The process may have changed its credentials since it connected (or the pid may name another
        // process): it must be the user's, through and through.
        guard fields.uids.allSatisfy({ $0 == uid }) else {
            return unreadable(identity, "it runs as uid \(fields.uids.map(String.init).joined(separator: "/"))")
        }
        identity.started = startTime(directory)
        if let startedBy {
            guard let started = identity.started, started <= startedBy else {
                return unreadable(identity, "it started after the call it is taken for")
            }
        }
        if fields.tracer != 0 { identity.doubts.append(.traced(by: fields.tracer)) }

        let userNamespace = directory.key(of: "ns/user"), mountNamespace = directory.key(of: "ns/mnt")
        let sameUser = userNamespace != nil && userNamespace == vantage.userNamespace
        let sameMount = mountNamespace != nil && mountNamespace == vantage.mountNamespace
        if !sameUser { identity.doubts.append(.otherNamespace("user")) }
        if !sameMount { identity.doubts.append(.otherNamespace("mnt")) }

        identity.executable = executable(directory, checkingPath: sameMount, &identity.doubts)
        if let variable = codeVariable(directory, &identity.doubts) {
            identity.doubts.append(.loaderVariable(variable))
        }
        // Sandboxes live in mount namespaces of their own: in the agent's, neither a root of one's own
        // (chroot) nor an AppArmor profile that a process may have changed into makes one.
        if !sameMount {
            identity.flatpakID = flatpakID(directory, vantage: vantage)
            identity.snapName = snapName(directory)
        }

        // Alive now, so alive all along: the pid was never reused while it was read, and every read
        // above described the process the pidfd names.
        guard latchkey_pidfd_exited(pidfd) == 0 else {
            return unreadable(CallerIdentity(uid: uid, pid: pid), "it exited while it was identified")
        }
        return identity
    }

    /// `identity` with the reason it names nothing.
    static func unreadable(_ identity: CallerIdentity, _ why: String) -> CallerIdentity {
        CallerIdentity(uid: identity.uid, pid: identity.pid, doubts: identity.doubts + [.unreadable(why)])
    }

    /// The executable (`exe`): its path, and the device and inode of the file the process runs, whatever
    /// its path names now. Adds `replacedExecutable` when the file was removed or the path now names
    /// another file (or a symbolic link): only the path says which application it is, and another file
    /// there says nothing of the process. `checkingPath` is false for a process in another mount
    /// namespace, whose paths mean something else here.
    static func executable(
        _ directory: borrowing ProcessDirectory, checkingPath: Bool, _ doubts: inout [CallerIdentity.Doubt]
    )
        -> CallerIdentity.Executable?
    {
        guard let target = directory.linkTarget("exe", cap: executablePathCap),
            let running = directory.status(of: "exe")
        else {
            doubts.append(.unreadable("cannot read its executable: \(String(cString: strerror(errno)))"))
            return nil
        }
        let path = String(decoding: target, as: UTF8.self)
        let key = FileKey(running)
        if checkingPath {
            // The path exactly as the kernel wrote it: a removed file reads "PATH (deleted)", which names
            // no file (or another one), so no suffix needs to be parsed.
            var there = stat()
            let same = fstatat(AT_FDCWD, path, &there, AT_SYMLINK_NOFOLLOW) == 0 && FileKey(there) == key
            if !same || running.st_nlink == 0 { doubts.append(.replacedExecutable) }
        }
        return CallerIdentity.Executable(path: path, device: key.device, inode: key.inode)
    }

    /// The first of `Environment.codeVariables` that the environment the process was started with
    /// sets (its name, without `=`), nil when none does. Adds `unreadable` when it cannot be read (a
    /// process that made itself non-dumpable keeps it from the user's processes) or is longer than
    /// `environmentCap`.
    static func codeVariable(_ directory: borrowing ProcessDirectory, _ doubts: inout [CallerIdentity.Doubt]) -> String?
    {
        let file = directory.openEntry("environ")
        guard file >= 0 else {
            doubts.append(.unreadable("cannot read its environment: \(String(cString: strerror(errno)))"))
            return nil
        }
        defer { close(file) }
        var scanner = EnvironmentScanner()
        // Read in pieces into one buffer on the stack: the environment is the caller's to make large.
        let outcome = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 4096) {
            buffer -> EnvironmentScanner.Outcome in
            var total = 0
            while true {
                let count = read(file, buffer.baseAddress!, buffer.count)
                if count < 0 && errno == EINTR { continue }
                guard count >= 0 else { return .unreadable }
                if count == 0 { return scanner.finish() }
                total += count
                guard total <= environmentCap else { return .unreadable }
                if let found = scanner.scan(UnsafeBufferPointer(rebasing: buffer[0..<count])) { return .found(found) }
            }
        }
        switch outcome {
        case .found(let name):
            return name
        case .clean:
            return nil
        case .unreadable:
            doubts.append(.unreadable("cannot read its environment through (longer than \(environmentCap) bytes?)"))
            return nil
        }
    }

    /// The application id of the Flatpak sandbox the process runs in, nil when it is in none. Follows
    /// xdg-desktop-portal (`xdp-app-info-flatpak.c`): `/.flatpak-info` at the process's root, read
    /// through `/proc/PID/root`; and trusts it only where xdg-desktop-portal's reason holds, at a root
    /// that is not the agent's: no process of the user can put a file at the host's `/`, while one
    /// with its own mount namespace and root can put anything at its own (docs/IDENTITY.md says what
    /// that leaves).
    static func flatpakID(_ directory: borrowing ProcessDirectory, vantage: Vantage) -> String? {
        let root = openat(directory.fd, "root", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard root >= 0 else { return nil }
        defer { close(root) }
        var rootInfo = stat()
        guard fstat(root, &rootInfo) == 0, FileKey(rootInfo) != vantage.root else { return nil }
        // Not through a symbolic link: an absolute one would be resolved at the agent's root, not the
        // sandbox's (xdg-desktop-portal follows it).
        let file = openat(root, FlatpakInfo.fileName, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)
        guard file >= 0 else { return nil }
        defer { close(file) }
        var info = stat()
        guard fstat(file, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_size <= FlatpakInfo.cap,
            let content = ProcessDirectory.read(file, cap: FlatpakInfo.cap), content.complete
        else { return nil }
        return FlatpakInfo(content.bytes)?.applicationID
    }

    /// The snap the process belongs to, from its AppArmor label (`SnapLabel`); nil without AppArmor or
    /// outside a snap. `attr/apparmor/current` where the kernel stacks security modules, else
    /// `attr/current`.
    static func snapName(_ directory: borrowing ProcessDirectory) -> String? {
        let label =
            directory.read("attr/apparmor/current", cap: labelCap) ?? directory.read("attr/current", cap: labelCap)
        guard let label, label.complete else { return nil }
        return SnapLabel.snapName(label.bytes)
    }

    /// The start time (field 22 of `/proc/PID/stat`, clock ticks since boot).
    static func startTime(_ directory: borrowing ProcessDirectory) -> UInt64? {
        // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so fields count from the
        // last ')'; the start time is the 20th after it.
        guard let stat = directory.read("stat", cap: 1024), stat.complete,
            let close = stat.bytes.lastIndex(of: UInt8(ascii: ")"))
        else { return nil }
        let fields = stat.bytes[(close + 1)...].split(separator: UInt8(ascii: " "))
        guard fields.count > 19 else { return nil }
        return UInt64(String(decoding: fields[fields.startIndex + 19], as: UTF8.self))
    }

    /// Whether the process `pid` is the one that started at `started` (`CallerIdentity.started`) and has
    /// not exited: a pid reused since names a process that started later. (A pid cannot come back
    /// within one clock tick: the kernel hands pids out in turn, through the whole range.)
    package static func isRunning(pid: Int32, started: UInt64?) -> Bool {
        guard let started, let directory = ProcessDirectory(pid: pid) else { return false }
        guard startTime(directory) == started else { return false }
        // A zombie has exited: its pid is not reused yet, but it writes nothing more.
        guard let stat = directory.read("stat", cap: 1024), stat.complete,
            let close = stat.bytes.lastIndex(of: UInt8(ascii: ")")), close + 2 < stat.bytes.count
        else { return false }
        return stat.bytes[close + 2] != UInt8(ascii: "Z") && stat.bytes[close + 2] != UInt8(ascii: "X")
    }

    /// Now, in the clock `/proc/PID/stat` counts start times in (ticks since boot), for `startedBy`.
    package static func ticksSinceBoot() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_BOOTTIME, &now)
        let hertz = UInt64(sysconf(Int32(_SC_CLK_TCK)))
        return UInt64(now.tv_sec) * hertz + UInt64(now.tv_nsec) * hertz / 1_000_000_000
    }
}

/// The lines of `/proc/PID/status` that identification needs, found in one pass over the bytes (this
/// runs for every connection).
struct StatusFields {
    /// Real, effective, saved and file-system uids (`Uid:`).
    var uids: [UInt32] = []
    /// The pid of the process tracing it, 0 when none does (`TracerPid:`).
    var tracer: Int32 = -1

    init?(_ bytes: [UInt8]) {
        var start = 0
        while start < bytes.count && (uids.isEmpty || tracer < 0) {
            var end = start
            while end < bytes.count && bytes[end] != UInt8(ascii: "\n") { end += 1 }
            if Self.field(bytes, start, end, "Uid:") {
                uids = Self.numbers(bytes, start + 4, end)
            } else if Self.field(bytes, start, end, "TracerPid:") {
                tracer = Self.numbers(bytes, start + 10, end).first.map { Int32(clamping: $0) } ?? -1
            }
            start = end + 1
        }
        guard uids.count == 4, tracer >= 0 else { return nil }
    }

    /// Whether the line `bytes[start..<end]` starts with `name`.
    private static func field(_ bytes: [UInt8], _ start: Int, _ end: Int, _ name: StaticString) -> Bool {
        let count = name.utf8CodeUnitCount
        guard end - start >= count else { return false }
        for index in 0..<count where bytes[start + index] != name.utf8Start[index] { return false }
        return true
    }

    /// The decimal numbers in `bytes[start..<end]`, separated by tabs or spaces; empty when anything
    /// else is there, or a number passes `UInt32`.
    private static func numbers(_ bytes: [UInt8], _ start: Int, _ end: Int) -> [UInt32] {
        var result: [UInt32] = []
        var current: UInt64?
        for index in start...end {
            let byte = index < end ? bytes[index] : UInt8(ascii: " ")
            if byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") {
                current = (current ?? 0) * 10 + UInt64(byte - UInt8(ascii: "0"))
                guard current! <= UInt64(UInt32.max) else { return [] }
            } else if byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") {
                if let value = current { result.append(UInt32(value)) }
                current = nil
            } else {
                return []
            }
        }
        return result
    }
}

/// Finds the first of `Environment.codeVariables` in an environment block (`NAME=value` entries, each
/// ended by a NUL) read in pieces, keeping only the head of the current entry.
struct EnvironmentScanner {
    /// What a whole block holds.
    enum Outcome: Equatable {
        /// It sets this variable (the name, without `=`).
        case found(String)
        /// None of them.
        case clean
        /// It could not be read to its end.
        case unreadable
    }

    private var head: [UInt8] = []

    init() { head.reserveCapacity(ProcessInspection.entryHead) }

    /// The variable an entry that ends in `bytes` sets, if it is one; nil to read on.
    mutating func scan(_ bytes: UnsafeBufferPointer<UInt8>) -> String? {
        for byte in bytes {
            if byte == 0 {
                if let found = Self.match(head) { return found }
                head.removeAll(keepingCapacity: true)
            } else if head.count < ProcessInspection.entryHead {
                head.append(byte)
            }
        }
        return nil
    }

    /// At the end of the block: a last entry without its NUL counts too.
    func finish() -> Outcome {
        Self.match(head).map { .found($0) } ?? .clean
    }

    static let names = Environment.codeVariables.map { Array($0.utf8) }

    private static func match(_ head: [UInt8]) -> String? {
        for name in names where head.count >= name.count && head[0..<name.count].elementsEqual(name) {
            return String(decoding: name.dropLast(), as: UTF8.self)
        }
        return nil
    }
}
