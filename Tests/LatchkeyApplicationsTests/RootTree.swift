import Foundation
import LatchkeyApplications
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// A temporary directory tree that the ownership rule can accept: made under `/run` (owned by root,
/// mode 0755; not under `/tmp`, which everyone may write), by a test running as root. Files and
/// directories are created root-owned with the modes given, then changed as each test needs.
final class RootTree {
    /// The uid the wrong-owner cases give files (`nobody`).
    static let nobody: uid_t = 65534

    let root: String

    /// Skips the test unless it runs as root: only root can make root-owned files and chown them.
    init() throws {
        guard geteuid() == 0 else { throw XCTSkip("the ownership rules need root to create root-owned files") }
        var template = Array("/run/latchkey-apps-test.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else {
            throw NSError(
                domain: NSPOSIXErrorDomain, code: Int(errno), userInfo: [NSLocalizedDescriptionKey: "mkdtemp"])
        }
        root = String(cString: made)
        try check(Glibc.chmod(root, 0o755), "chmod \(root)")
    }

    deinit {
        try? FileManager.default.removeItem(atPath: root)
    }

    /// `root + "/" + relative`.
    func path(_ relative: String) -> String {
        root + "/" + relative
    }

    /// Creates the directory `relative` (and its parents) with `mode`, owned by root.
    @discardableResult
    func directory(_ relative: String, mode: mode_t = 0o755) throws -> String {
        var prefix = root
        for component in relative.split(separator: "/") {
            prefix += "/" + component
            if mkdir(prefix, 0o755) != 0 && errno != EEXIST { try check(-1, "mkdir \(prefix)") }
        }
        try check(Glibc.chmod(prefix, mode), "chmod \(prefix)")
        return prefix
    }

    /// Writes `content` to `relative` (its directory created), owned by root with `mode`.
    @discardableResult
    func file(_ relative: String, _ content: String, mode: mode_t = 0o644) throws -> String {
        try bytes(relative, Array(content.utf8), mode: mode)
    }

    /// Writes `content` to `relative` (its directory created), owned by root with `mode`.
    @discardableResult
    func bytes(_ relative: String, _ content: [UInt8], mode: mode_t = 0o644) throws -> String {
        let target = path(relative)
        let parent = (relative as NSString).deletingLastPathComponent
        if !parent.isEmpty, !FileManager.default.fileExists(atPath: path(parent)) { try directory(parent) }
        unlink(target)
        let fd = open(target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        try check(fd, "create \(target)")
        defer { close(fd) }
        let written = content.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        try check(written == content.count ? 0 : -1, "write \(target)")
        try check(fchmod(fd, mode), "chmod \(target)")
        return target
    }

    /// An executable file: its content does not matter, only its identity, as long as it is not a
    /// script (`#!`), which no process can be seen to run.
    @discardableResult
    func executable(_ relative: String, mode: mode_t = 0o755) throws -> String {
        try bytes(relative, [0x7F] + Array("ELF, for its identity only".utf8), mode: mode)
    }

    /// An application file's text.
    static func application(
        id: String, executable: String? = nil, flatpak: String? = nil, snap: String? = nil, groups: String
    ) -> String {
        var lines = ["[Application]", "Id=\(id)"]
        if let executable { lines.append("Executable=\(executable)") }
        if let flatpak { lines.append("FlatpakId=\(flatpak)") }
        if let snap { lines.append("SnapName=\(snap)") }
        lines.append("AccessGroups=\(groups)")
        return lines.joined(separator: "\n") + "\n"
    }

    func chown(_ relative: String, to uid: uid_t) throws {
        try check(Glibc.lchown(path(relative), uid, 0), "chown \(relative)")
    }

    func chmod(_ relative: String, _ mode: mode_t) throws {
        try check(Glibc.chmod(path(relative), mode), "chmod \(relative)")
    }

    func symlink(_ relative: String, to target: String) throws {
        try check(Glibc.symlink(target, path(relative)), "symlink \(relative)")
    }

    /// The identity of a process running `path` (as the agent would read it from /proc).
    func identity(running path: String, doubts: [CallerIdentity.Doubt] = []) throws -> CallerIdentity {
        var info = Glibc.stat()
        try check(lstat(path, &info), "stat \(path)")
        return CallerIdentity(
            uid: 1000, pid: 4242,
            executable: .init(path: path, device: UInt64(info.st_dev), inode: UInt64(info.st_ino)), doubts: doubts)
    }

    /// Loads the registry from `relatives`, lowest precedence first.
    func registry(_ relatives: String...) -> ApplicationRegistry {
        ApplicationRegistry(directories: relatives.map(path))
    }

    private func check(_ result: Int32, _ what: String) throws {
        guard result >= 0 else {
            throw NSError(
                domain: NSPOSIXErrorDomain, code: Int(errno),
                userInfo: [NSLocalizedDescriptionKey: "\(what): \(String(cString: strerror(errno)))"])
        }
    }

    private func check(_ result: Int, _ what: String) throws {
        try check(Int32(clamping: result), what)
    }
}
