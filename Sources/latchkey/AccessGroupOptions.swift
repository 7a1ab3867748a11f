import ArgumentParser
import Foundation
import Latchkey
import LatchkeySecrets

#if canImport(Glibc)
    import Glibc
#endif

/// `--access-group` and `--all-groups`: the administrator's reach into access groups (issue 12).
///
/// Without them a command sees what any unlisted program sees, the `default` group. Naming another group,
/// or all of them, asks for the keychain password first, in this invocation (on the terminal, or from
/// `--keychain-password-fd`), and the agent lets this command's connection use those groups
/// (`KeychainControl.authorizeAccessGroups`); it never widens anything beyond this command.
struct AccessGroupOptions: ParsableArguments {
    @Option(
        name: .customLong("access-group"),
        help: ArgumentHelp(
            "Access group (kSecAttrAccessGroup). Another group than 'default' asks for the keychain password.",
            valueName: "group"))
    var accessGroup: String?

    @Flag(
        name: .customLong("all-groups"),
        help: "Reach the items of every access group (asks for the keychain password); finds, deletes and dumps only.")
    var allGroups = false

    @Option(
        name: .customLong("keychain-password-fd"),
        help: ArgumentHelp(
            "Read the keychain password that --access-group or --all-groups asks for from this file descriptor "
                + "(one line) instead of the terminal.",
            valueName: "fd"))
    var keychainPasswordFD: Int32?

    /// The group new items go to, and queries filter on (nil: the command's own).
    var filter: [String: Any] {
        accessGroup.map { [kSecAttrAccessGroup as String: $0] } ?? [:]
    }

    func validate() throws {
        if let accessGroup, accessGroup.isEmpty { throw ValidationError("--access-group needs a group name") }
        if let fd = keychainPasswordFD, fd < 0 { throw ValidationError("--keychain-password-fd needs a descriptor") }
        if allGroups && accessGroup != nil { throw ValidationError("give --access-group or --all-groups, not both") }
    }

    /// Asks for the keychain password and authorizes the groups this command names, when it names any
    /// beyond `default` (or, with --all-groups, every group).
    func authorize() throws(ExitCode) {
        var groups: [String] = []
        let all = allGroups
        if all {
            groups = ["*"]
        } else if let accessGroup, accessGroup != "default" {
            groups = [accessGroup]
        }
        guard !groups.isEmpty else { return }
        let what = all ? "every access group" : "access group '\(groups[0])'"
        let password: SecretBytes
        do throws(InputFailure) {
            if let fd = keychainPasswordFD {
                guard let line = try PasswordInput.readLine(from: fd) else {
                    throw InputFailure("no keychain password on descriptor \(fd)")
                }
                password = line
            } else {
                password = try PasswordInput.prompt("keychain password (to use \(what)): ")
            }
        } catch {
            throw error.report()
        }
        do throws(KeychainControl.Failure) {
            try KeychainControl.authorizeAccessGroups(groups, password: password)
        } catch {
            throw controlFailure("KeychainControl.authorizeAccessGroups", error)
        }
    }
}
