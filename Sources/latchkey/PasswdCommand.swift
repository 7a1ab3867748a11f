import ArgumentParser
import Latchkey
import LatchkeySecrets

/// `latchkey passwd`: changes the keychain password.
struct PasswdCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "passwd",
        abstract: "Change the keychain password.",
        discussion: """
            Asks for the current password, then twice for the new one, and re-protects the class \
            keys under the new password. Items are not re-encrypted: their keys do not change. The \
            new password must not be empty.

            With --password-stdin, standard input holds two lines: the current password, then the \
            new one.

            Examples:
              latchkey passwd
              printf '%s\\n%s\\n' "$OLD" "$NEW" | latchkey passwd --password-stdin
            """)

    @Flag(
        name: .customLong("password-stdin"),
        help: "Read the current and the new password from the first two lines of standard input.")
    var passwordStdin = false

    func run() throws {
        let old: SecretBytes
        let new: SecretBytes
        do throws(InputFailure) {
            old = try PasswordInput.existing(fromStandardInput: passwordStdin, prompt: "Current keychain password: ")
            new = try PasswordInput.new(
                fromStandardInput: passwordStdin,
                prompt: "New keychain password: ",
                confirmation: "Retype the new keychain password: ")
        } catch {
            throw error.report()
        }
        do throws(KeychainControl.Failure) {
            try KeychainControl.changePassword(old: old, new: new)
        } catch {
            throw controlFailure("KeychainControl.changePassword", error)
        }
        print("changed the keychain password")
    }
}
