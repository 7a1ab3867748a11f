import ArgumentParser
import Foundation
import Latchkey

/// Exit codes of `latchkey`, documented in latchkey(1).
enum ExitStatus {
    /// A keychain call failed.
    static let failure: Int32 = 1
    /// No item matched: the exit code macOS `security` uses for errSecItemNotFound, so scripts written
    /// for it keep working.
    static let itemNotFound: Int32 = 44
    /// A usage error (EX_USAGE), as ArgumentParser exits for validation errors.
    static let usage: Int32 = 64
}

/// Writes a line to standard error, prefixed with the command name.
func printError(_ message: String) {
    FileHandle.standardError.write(Data("latchkey: \(message)\n".utf8))
}

/// Reports a failed SecItem or KeychainControl call on standard error and returns the exit code to
/// throw:
///
///     latchkey: SecItemCopyMatching: The specified item could not be found in the keychain. (-25300)
///     latchkey: detail: <the agent's detail, when it gave one>
///     latchkey: <a hint, for the states a user can fix>
func failure(_ function: String, _ status: OSStatus, detail: String?) -> ExitCode {
    let message = SecCopyErrorMessageString(status, nil).map { $0 as String } ?? "OSStatus \(status)"
    printError("\(function): \(message) (\(status))")
    if let detail, !detail.isEmpty { printError("detail: \(detail)") }
    if let hint = hint(for: status, detail: detail) { printError(hint) }
    return ExitCode(status == errSecItemNotFound ? ExitStatus.itemNotFound : ExitStatus.failure)
}

/// Reports a failed SecItem call, taking the detail from `LatchkeyDiagnostics` (the agent's message
/// for the last failure on this thread).
func secItemFailure(_ function: String, _ status: OSStatus) -> ExitCode {
    failure(function, status, detail: LatchkeyDiagnostics.lastErrorDetail)
}

/// Reports a failed KeychainControl call; `function` names it, e.g. "KeychainControl.unlock".
func controlFailure(_ function: String, _ error: KeychainControl.Failure) -> ExitCode {
    failure(function, error.status, detail: error.detail)
}

/// What the user can do about a status, for the few that have an obvious remedy.
func hint(for status: OSStatus, detail: String?) -> String? {
    switch status {
    case errSecInteractionNotAllowed where Interaction.refusedCheck(status, detail: detail):
        Interaction.allowed
            ? "the item needs the user present, and nobody could be asked"
            : "the item needs the user present (its access control), and --no-ui forbids asking"
    case errSecInteractionNotAllowed: "the keychain is locked; run 'latchkey unlock'"
    case errSecNoDefaultKeychain: "run 'latchkey init' to create a keychain"
    // An agent at its limits answers errSecNotAvailable itself, with a detail starting "latchkeyd is busy"
    // that says to try again (docs/PROTOCOL.md §5): it was reached, so the usual hint would mislead.
    case errSecNotAvailable where detail?.hasPrefix("latchkeyd is busy") == true: nil
    case errSecNotAvailable: "the agent could not be reached or started"
    default: nil
    }
}

/// A failure that is not a keychain status (unreadable password input, mismatched confirmation):
/// reported as `latchkey: <message>`, exit 1.
struct InputFailure: Error {
    var message: String
    init(_ message: String) { self.message = message }

    /// Reports the failure and returns the exit code to throw.
    func report() -> ExitCode {
        printError(message)
        return ExitCode(ExitStatus.failure)
    }
}
