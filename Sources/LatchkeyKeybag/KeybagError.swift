import LatchkeyCrypto

/// Why a keybag could not be read, unlocked or written.
///
/// Descriptions name the file and the problem, never a password, key or file byte, because they are
/// shown to users and written to the journal.
package enum KeybagError: Error, Equatable, CustomStringConvertible {
    /// No file at `path`.
    case notFound(path: String)
    /// The file does not start with the keybag magic; it is some other file.
    case notAKeybag(path: String)
    /// The file is a keybag but damaged: truncated, checksum mismatch, malformed fields, or a class
    /// key that does not unwrap although the password verified.
    case corrupt(path: String, reason: String)
    /// The file is an intact keybag in a format version this build does not know (written by a
    /// newer latchkey).
    case unsupportedVersion(path: String, version: UInt16)
    /// The password (master key) does not match the keybag's verifier.
    case wrongPassword
    /// A system call failed; `errno` is its error number.
    case io(path: String, errno: Int32)
    /// The device factor does not open the ThisDeviceOnly classes: the keybag was bound on another
    /// machine (or for another uid), or the machine secret changed.
    case wrongDevice(path: String)
    /// A device-bound keybag's ThisDeviceOnly classes need the device factor, which only the PAM
    /// module (as root) can compute, and none is held.
    case deviceFactorRequired(path: String)
    /// Argon2 parameters rejected for a new keybag or password; the string says which rule.
    case weakParameters(String)
    /// An intact keybag whose Argon2id cost is beyond the derivation limits (docs/KEYBAG.md): refused
    /// without deriving, as pam_latchkey refuses it. latchkey never writes one.
    case costRefused(path: String, parameters: Argon2Parameters)

    /// A one-line, secret-free explanation.
    package var description: String {
        switch self {
        case .notFound(let path): "keybag not found: \(path)"
        case .notAKeybag(let path): "not a latchkey keybag: \(path)"
        case .corrupt(let path, let reason): "keybag is corrupt (\(reason)): \(path)"
        case .unsupportedVersion(let path, let version):
            "keybag format version \(version) is newer than this latchkey supports: \(path)"
        case .wrongPassword: "wrong keychain password"
        case .io(let path, let code): "keybag I/O error on \(path): \(KeybagError.errnoText(code)) (errno \(code))"
        case .weakParameters(let reason): "Argon2 parameters rejected: \(reason)"
        case .costRefused(let path, let p):
            "keybag refused: its Argon2id cost (t=\(p.timeCost), m=\(p.memoryKiB) KiB, p=\(p.parallelism)) is "
                + "beyond the limits latchkey and pam_latchkey derive with (\(Argon2Parameters.derivationLimitsText)); "
                + "latchkey never writes such a keybag, and it was left untouched: \(path)"
        case .wrongDevice(let path):
            "the keychain's ThisDeviceOnly classes belong to another machine or user (the device factor does not open them): \(path)"
        case .deviceFactorRequired(let path):
            "the keychain's ThisDeviceOnly classes are bound to this machine and need a login through pam_latchkey first: \(path)"
        }
    }

    private static func errnoText(_ code: Int32) -> String {
        guard let text = strerror(code) else { return "error" }
        return String(cString: text)
    }
}

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
