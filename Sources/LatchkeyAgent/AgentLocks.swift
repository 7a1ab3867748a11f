import LatchkeyEngine
import LatchkeySystem
import LatchkeyTransport
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// The two `flock` locks an agent holds for its whole life, taken before it opens the keychain or
/// touches a socket path:
///
/// - the **socket lock**, `agent.lock` in the socket directory (`AgentEndpoint.lockPath`): one agent
///   binds a given socket path. A second agent started there exits at once ("already running"), and
///   only the holder may replace a socket file it finds (one left by an agent that crashed).
/// - the **keychain lock**, `agent.lock` in the keychain directory (`KeychainLocation.agentLockPath`):
///   one agent serves a given keychain, whatever socket it listens on. The socket lock alone could not
///   say so: a logout removes `$XDG_RUNTIME_DIR` (and the socket lock with it) while an agent may live
///   on, and a client without `XDG_RUNTIME_DIR` (and without a logind runtime directory) looks in
///   `/tmp/latchkey-UID`.
///
/// The socket lock is tried first and never waited for. The keychain lock is then waited for, briefly:
/// the agent that holds it serves another socket, and if that socket was removed (the logout above) it
/// is stepping down (`SocketWatch`), so the new agent, started by a client that found no socket, takes
/// over within moments. Nobody waits for a socket lock while holding a keychain lock, so the two cannot
/// deadlock. Both descriptors stay open until the process ends, which is what holds the locks.
package struct AgentLocks {
    /// How long a new agent waits for a keychain lock held by an agent that serves another socket:
    /// longer than an agent takes to notice that its socket is gone and exit (inotify, milliseconds),
    /// shorter than the 5 s a starting client waits for the agent to be ready.
    static let keychainWait: Duration = .seconds(3)
    /// How often the keychain lock is tried while waiting.
    static let keychainRetryMicroseconds: UInt32 = 50_000

    /// The socket lock; nil when the socket is inherited from systemd, which owns the socket file.
    let socketLockFD: Int32?
    let keychainLockFD: Int32

    /// Takes the socket lock for `endpoint` (nil under socket activation), then the keychain lock for
    /// `keychain`. Throws `alreadyRunning` when another agent holds either.
    static func take(binding endpoint: AgentEndpoint?, keychain: KeychainLocation) throws(ListenerError) -> AgentLocks {
        let socketLockFD = try endpoint.map { endpoint throws(ListenerError) in try takeSocketLock(endpoint) }
        do {
            let keychainLockFD = try takeKeychainLock(keychain, socketPath: endpoint?.socketPath)
            return AgentLocks(socketLockFD: socketLockFD, keychainLockFD: keychainLockFD)
        } catch {
            if let socketLockFD { close(socketLockFD) }
            throw error
        }
    }

    /// Creates and checks the socket directory, and locks `agent.lock` in it without waiting.
    private static func takeSocketLock(_ endpoint: AgentEndpoint) throws(ListenerError) -> Int32 {
        if let problem = endpoint.prepareDirectory(create: true) {
            throw ListenerError(description: problem)
        }
        var attempts = 0
        while true {
            let fd = try openLockFile(endpoint.lockPath, what: "the agent lock file")
            while flock(fd, LOCK_EX | LOCK_NB) != 0 {
                if errno == EINTR { continue }
                let error = errno
                close(fd)
                guard error == EWOULDBLOCK else {
                    throw ListenerError(
                        description: "cannot lock \(endpoint.lockPath): \(String(cString: strerror(error)))")
                }
                throw ListenerError(
                    description: "another latchkeyd already serves \(endpoint.socketPath)", alreadyRunning: true,
                    socketTakenByAnother: true)
            }
            if try isStillAtPath(fd, endpoint.lockPath, attempts: &attempts) { return fd }
        }
    }

    /// Creates the keychain directory if needed (as `latchkey init` would), and locks `agent.lock` in
    /// it, waiting at most `keychainWait` for an agent that holds it to exit. Fails closed: a lock that
    /// cannot be taken for any other reason than another holder stops the agent.
    private static func takeKeychainLock(_ keychain: KeychainLocation, socketPath: String?) throws(ListenerError)
        -> Int32
    {
        do {
            try Files.createDirectories(FilePath(keychain.directory))
        } catch {
            throw ListenerError(description: "cannot create the keychain directory \(error)")
        }
        let deadline = ContinuousClock.now + keychainWait
        var attempts = 0
        while true {
            let fd = try openLockFile(keychain.agentLockPath, what: "the keychain lock file")
            while flock(fd, LOCK_EX | LOCK_NB) != 0 {
                let error = errno
                if error == EINTR { continue }
                guard error == EWOULDBLOCK else {
                    close(fd)
                    throw ListenerError(
                        description: "cannot lock \(keychain.agentLockPath): \(String(cString: strerror(error)))")
                }
                guard ContinuousClock.now < deadline else {
                    let holder = recordedHolder(fd)
                    close(fd)
                    throw ListenerError(
                        description: "another latchkeyd\(holder) already serves the keychain in \(keychain.directory)"
                            + (socketPath.map { ", through another socket than \($0)" } ?? ""),
                        alreadyRunning: true)
                }
                usleep(keychainRetryMicroseconds)
            }
            if try isStillAtPath(fd, keychain.agentLockPath, attempts: &attempts) {
                recordHolder(fd, path: keychain.agentLockPath)
                return fd
            }
        }
    }

    /// How many times a lock is taken again on a lock file that was replaced meanwhile before the agent
    /// gives up (each replacement is someone else's doing; a few in a row mean something keeps at it).
    static let maximumRelocks = 8

    /// After `flock` on `fd` succeeded: whether `path` still names the file `fd` locked (same device and
    /// inode, `lstat`). The lock belongs to the file, not the name: while this agent waited, the file may
    /// have been deleted or replaced (renamed over) and another agent may hold the lock of the file now
    /// at the path; the lock of the old one excludes nobody. Then `fd` is closed and false returned, and
    /// the caller opens the path again and locks that; after `maximumRelocks` times it throws.
    private static func isStillAtPath(_ fd: Int32, _ path: String, attempts: inout Int) throws(ListenerError)
        -> Bool
    {
        var held = stat(), named = stat()
        guard fstat(fd, &held) == 0 else {
            let error = errno
            close(fd)
            throw ListenerError(description: "cannot examine \(path): \(String(cString: strerror(error)))")
        }
        if lstat(path, &named) == 0 && named.st_dev == held.st_dev && named.st_ino == held.st_ino { return true }
        close(fd)
        attempts += 1
        guard attempts <= maximumRelocks else {
            throw ListenerError(description: "\(path) keeps being replaced while it is locked; not starting")
        }
        AgentLog.warning("\(path) was replaced or removed while it was being locked; locking it again")
        return false
    }

    /// A regular file of our own, never through a link and never blocking on a FIFO planted there.
    private static func openLockFile(_ path: String, what: String) throws(ListenerError) -> Int32 {
        do {
            return try FileDescriptor.openRegularFile(
                FilePath(path), .readWrite, options: [.create], permissions: [.ownerReadWrite], owner: getuid()
            ).rawValue
        } catch {
            throw ListenerError(description: "\(what): \(error)")
        }
    }

    // MARK: - Who holds the keychain lock

    /// The most of a lock file read back: a pid and a host name.
    private static let recordLimit = 128

    /// Writes "PID HOST" into the keychain lock file, for the message a second agent logs (and for a
    /// person who wonders which agent holds it; the home directory may be shared between machines).
    /// Never read as an instruction: nothing is ever sent to that pid.
    ///
    /// Only into a file with one name: a lock file that is a hard link to another file of the user's is
    /// locked all the same, but never truncated or written (the record is a courtesy, that file's
    /// content is not ours to destroy).
    private static func recordHolder(_ fd: Int32, path: String) {
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_nlink == 1 else {
            AgentLog.warning("\(path) has other names (hard links): not recording this agent's pid in it")
            return
        }
        var name = [CChar](repeating: 0, count: 256)
        let host =
            gethostname(&name, name.count - 1) == 0
            ? name.withUnsafeBufferPointer { String(cString: $0.baseAddress!) } : ""
        let record = Array("\(getpid()) \(host)\n".utf8)
        guard ftruncate(fd, 0) == 0 else { return }
        _ = record.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
    }

    /// " (pid N on HOST)" from the keychain lock file, or "" when it holds nothing of that shape: the
    /// file is the user's, but anything of the user's could have written it, so only digits and a host
    /// name's characters are repeated in the log.
    private static func recordedHolder(_ fd: Int32) -> String {
        var bytes = [UInt8](repeating: 0, count: recordLimit)
        let count = pread(fd, &bytes, bytes.count, 0)
        guard count > 0 else { return "" }
        let fields = bytes[0..<count].split(whereSeparator: { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\n") })
        guard let first = fields.first, first.count <= 10, first.allSatisfy({ (0x30...0x39).contains($0) }),
            let pid = Int32(String(decoding: first, as: UTF8.self)), pid > 0
        else { return "" }
        guard fields.count > 1, let host = fields.dropFirst().first, host.count <= 64,
            host.allSatisfy({ isHostNameByte($0) })
        else { return " (pid \(pid))" }
        return " (pid \(pid) on \(String(decoding: host, as: UTF8.self)))"
    }

    private static func isHostNameByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."):
            true
        default: false
        }
    }
}
