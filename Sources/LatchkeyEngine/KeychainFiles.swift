import LatchkeyModel
import LatchkeySystem
import SystemPackage

// The engine's few file checks, on LatchkeySystem's helpers (no-follow, regular files only), with the
// engine's own wording of what they report.

extension FileIdentity {
    init?(path: String) { self.init(path: FilePath(path)) }
}

/// The first line of a small text file (at most 512 bytes read), or nil if there is none; a marker
/// whose first line is empty still says what it means.
func firstLine(of path: String) -> String? {
    Files.firstLine(of: FilePath(path)).map { $0.isEmpty ? "the login password and the keychain password differ" : $0 }
}

func fileExists(_ path: String) -> Bool {
    Files.exists(FilePath(path))
}

/// Creates `path` and its parents with mode 0700 (existing directories are left as they are).
func makeDirectory(_ path: String) throws(SecError) {
    do {
        try Files.createDirectories(FilePath(path))
    } catch {
        throw SecError(SecStatus.io, "cannot create directory \(error)")
    }
}
