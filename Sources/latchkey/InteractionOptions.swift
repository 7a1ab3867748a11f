import ArgumentParser
import Foundation
import Latchkey

/// `--no-ui`: never ask the user (kSecUseAuthenticationUIFail), for scripts. An item made with
/// `--access-control` then fails with errSecInteractionNotAllowed (-25308) instead of showing a prompt.
struct InteractionOptions: ParsableArguments {
    @Flag(
        name: .customLong("no-ui"),
        help: ArgumentHelp(
            "Never ask the user: an item that needs the user present fails with errSecInteractionNotAllowed "
                + "(-25308) instead of showing a prompt (kSecUseAuthenticationUIFail)."))
    var noUI = false

    /// Makes every query of this command carry the setting (`ItemQuery.make`, `addOrUpdate`). Called
    /// at the start of `run`, before any keychain call.
    func apply() {
        Interaction.allowed = !noUI
    }
}

/// Whether this command may ask the user for a user check: set once by `InteractionOptions.apply`
/// before the first keychain call of a command (the command runs on one thread, top to bottom), read by
/// the code that builds queries.
enum Interaction {
    nonisolated(unsafe) static var allowed = true

    /// `query` with `kSecUseAuthenticationUI` = Fail when the command may not ask.
    static func applied(to query: [String: Any]) -> [String: Any] {
        guard !allowed else { return query }
        var query = query
        query[kSecUseAuthenticationUI as String] = kSecUseAuthenticationUIFail
        return query
    }

    /// Whether a failure is a user check that `--no-ui` refused (the agent's detail says so; a locked
    /// keychain gives the same status).
    static func refusedCheck(_ status: OSStatus, detail: String?) -> Bool {
        status == errSecInteractionNotAllowed && detail?.contains("user check") == true
    }

    /// SecKey calls carry no kSecUseAuthenticationUI, so with `--no-ui` a key whose access control needs
    /// a user check is refused here, from its attributes, before the call that would ask.
    static func checkKeyUse(_ attributes: [String: Any], what: String) throws(ExitCode) {
        guard !allowed, let control = attributes[kSecAttrAccessControl as String] as? SecAccessControl,
            !control.flags.intersection(AccessControlWords.constraints).isEmpty
        else { return }
        throw failure(
            "SecKeyCopyExternalRepresentation", errSecInteractionNotAllowed,
            detail: "\(what) needs a user check (kSecUseAuthenticationUIFail)")
    }
}
