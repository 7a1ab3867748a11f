import LatchkeyCrypto
import LatchkeySystem
import SystemPackage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

extension Keybag {
    /// Largest file `load` reads. Far above any version-1 keybag (580 bytes); stops a wrong path
    /// (a disk image, /dev/zero) from being read into memory.
    static let maximumFileSize = 1 << 20

    /// Reads and validates the keybag at `path` without modifying it. Refuses to follow a symbolic
    /// link in the last component (`O_NOFOLLOW`), so a planted link cannot redirect the agent.
    ///
    /// A keybag whose Argon2id cost is beyond the derivation limits is `.costRefused`: `parse` accepts it
    /// (so does pam/keybag.c's lk_parse, the format allows it), but whoever loads a keybag loads it to
    /// derive from it, and pam_latchkey refuses such a file at the same point.
    package static func load(path: String) throws -> Keybag {
        // Files.read never blocks on a FIFO planted in place of the keybag (it is refused as not a regular
        // file), and reads one byte past the cap so that a larger file is seen as such by `parse`.
        let bytes: [UInt8]
        do {
            bytes = try Files.read(FilePath(path), upTo: maximumFileSize + 1)
        } catch {
            switch error.reason {
            case .system(.noSuchFileOrDirectory): throw KeybagError.notFound(path: path)
            case .system(let errno): throw KeybagError.io(path: path, errno: errno.rawValue)
            case .notRegularFile, .wrongOwner: throw KeybagError.notAKeybag(path: path)
            }
        }
        let keybag = try parse(bytes, path: path)
        guard keybag.parameters.isWithinDerivationLimits else {
            throw KeybagError.costRefused(path: path, parameters: keybag.parameters)
        }
        return keybag
    }

    /// Atomically replaces (or creates) the keybag at `path`; the parent directory must exist.
    ///
    /// Writes `path.tmp-<16 hex>` with `O_CREAT|O_EXCL|O_NOFOLLOW` and mode 0600, fsyncs it, renames
    /// it over `path`, then fsyncs the directory so the rename itself is durable. Until the rename
    /// the old file is untouched; after it the new file is complete. A crash therefore leaves either
    /// the old or the new keybag at `path`, plus at worst a stray temporary file that `load` never
    /// looks at.
    package func write(to path: String) throws {
        try write(to: path, beforeRename: nil)
    }

    /// `write(to:)` with a hook run after the temporary file is durable and before the rename, so
    /// tests can observe the crash window. If the hook throws, the temporary file is removed.
    func write(to path: String, beforeRename: ((_ temporaryPath: String) throws -> Void)?) throws {
        let suffix = try SecureRandom.bytes(8).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
        // Durable: the directory is synced after the rename too. If only that fails, the new keybag is
        // already in place, so the failure is reported but not undone.
        do {
            try Files.replace(
                FilePath(path), with: serialized(), through: FilePath(path + ".tmp-" + suffix),
                durable: true, beforeRename: beforeRename.map { hook in { try hook($0.string) } })
        } catch let error as FileError {
            throw KeybagError.io(path: error.path.string, errno: error.errno?.rawValue ?? EIO)
        }
    }
}
