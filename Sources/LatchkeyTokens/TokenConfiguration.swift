import LatchkeySystem
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// Which PKCS#11 modules the agent loads (docs/TOKENS.md, "Configuration"): those of the system's p11-kit
/// configuration (unless `system-modules = no`) and those an administrator names in a root-owned file.
/// A module is code the agent runs: only root chooses it, never the user's environment.
package struct TokenConfiguration: Sendable, Equatable {
    /// The administrator's file.
    package static let path = "/etc/latchkey/tokens.conf"
    /// Names another file in place of `path`: honoured only by an agent whose effective uid is root
    /// (tests), as `LATCHKEY_PAM_DIR` is; a user's agent ignores it, since any program of the user sets
    /// its environment and must not choose the code the agent loads.
    package static let variable = "LATCHKEY_TOKENS_CONF"
    /// Asks p11-kit to skip the user's configuration (`~/.config/pkcs11`), for the modules' own option
    /// lookups; the agent sets it for itself at start. p11-kit 0.24 reads this name (its log message
    /// says `P11_NO_USER_CONFIG`, which it never reads). The modules themselves are chosen by
    /// `SystemModules`, which never reads the user's configuration.
    package static let noUserConfigVariable = "P11_KIT_NO_USER_CONFIG"
    /// The largest configuration file read.
    static let maximumSize = 64 * 1024

    /// Whether the modules of p11-kit's configuration are loaded (its trust-policy modules never are:
    /// they hold the system's certificate authorities, not a user's tokens).
    package var systemModules = true
    /// Absolute paths of further modules.
    package var modules: [String] = []
    /// Seconds between two looks at the slots (1 to 60).
    package var pollSeconds = 1.0
    /// Names of modules without hot-plug that the watcher starts again (C_Finalize, C_Initialize) at each
    /// look while none of their tokens is logged in, so that tokens made meanwhile appear (SoftHSM2).
    package var restart: Set<String> = []

    package init(systemModules: Bool = true, modules: [String] = [], pollSeconds: Double = 1.0) {
        self.systemModules = systemModules
        self.modules = modules
        self.pollSeconds = pollSeconds
    }

    /// The configuration in effect, and the warnings that reading it gave (for the agent's log).
    package static func load(euid: uid_t = geteuid()) -> (TokenConfiguration, [String]) {
        var path = Self.path
        var warnings: [String] = []
        if let named = Environment.value(variable), !named.isEmpty {
            if euid == 0 && named.hasPrefix("/") {
                path = named
            } else {
                warnings.append("\(variable) is ignored: only an agent running as root honours it (tests)")
            }
        }
        let bytes: [UInt8]
        do {
            bytes = try Files.read(FilePath(path), upTo: maximumSize + 1, owner: 0)
        } catch {
            if error.errno == .noSuchFileOrDirectory { return (TokenConfiguration(), warnings) }
            warnings.append("\(path) is not used: \(error)")
            return (TokenConfiguration(), warnings)
        }
        guard bytes.count <= maximumSize, isRootOnly(path) else {
            warnings.append("\(path) is not used: larger than \(maximumSize) bytes, or writable by others than root")
            return (TokenConfiguration(), warnings)
        }
        var parsed = parse(String(decoding: bytes, as: UTF8.self), warnings: &warnings)
        parsed.modules = parsed.modules.filter { module in
            guard isRootOnly(module) else {
                warnings.append(
                    "module \(module) is not loaded: not a regular file owned by root and writable only by it")
                return false
            }
            return true
        }
        return (parsed, warnings)
    }

    /// Parses `key = value` lines; `#` starts a comment.
    static func parse(_ text: String, warnings: inout [String]) -> TokenConfiguration {
        var configuration = TokenConfiguration()
        for (number, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            let trimmed = line.trimmingBlanks()
            if trimmed.isEmpty { continue }
            let parts = trimmed.split(separator: "=", maxSplits: 1).map { $0.trimmingBlanks() }
            guard parts.count == 2 else {
                warnings.append("tokens.conf line \(number + 1): expected key = value")
                continue
            }
            switch (parts[0], parts[1]) {
            case ("system-modules", "yes"): configuration.systemModules = true
            case ("system-modules", "no"): configuration.systemModules = false
            case ("module", let module) where module.hasPrefix("/"): configuration.modules.append(module)
            case ("restart", let name) where !name.isEmpty: configuration.restart.insert(name)
            case ("poll-seconds", let value):
                if let seconds = Double(value), (1...60).contains(seconds) {
                    configuration.pollSeconds = seconds
                } else {
                    warnings.append("tokens.conf line \(number + 1): poll-seconds is 1 to 60")
                }
            default:
                warnings.append("tokens.conf line \(number + 1): unknown setting '\(parts[0])' or value")
            }
        }
        return configuration
    }

    /// Whether `path` and the directories above it are owned by root and writable by nobody else (links
    /// are resolved by `realpath` first, and each component is then checked without following any). A
    /// directory others may write into is accepted only with the sticky bit (/tmp): there, nobody but its
    /// owner, root here, can rename or replace an entry.
    /// `directory`: the path is a directory, not a regular file.
    static func isRootOnly(_ path: String, directory: Bool = false) -> Bool {
        guard let resolved = realpath(path, nil) else { return false }
        defer { free(resolved) }
        var current = String(cString: resolved)
        var info = stat()
        guard lstat(current, &info) == 0, (info.st_mode & S_IFMT) == (directory ? S_IFDIR : S_IFREG) else {
            return false
        }
        while true {
            guard lstat(current, &info) == 0, info.st_uid == 0 else { return false }
            let sticky = (info.st_mode & S_IFMT) == S_IFDIR && info.st_mode & S_ISVTX != 0
            guard info.st_mode & (S_IWGRP | S_IWOTH) == 0 || sticky else { return false }
            if current == "/" { return true }
            let parent = current.split(separator: "/").dropLast().joined(separator: "/")
            current = "/" + parent
        }
    }
}

extension StringProtocol {
    fileprivate func trimmingBlanks() -> String {
        var text = Substring(self)
        while text.first == " " || text.first == "\t" || text.first == "\r" { text.removeFirst() }
        while text.last == " " || text.last == "\t" || text.last == "\r" { text.removeLast() }
        return String(text)
    }
}
