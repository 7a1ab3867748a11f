import ArgumentParser
import Latchkey
import LatchkeySecrets

/// `latchkey unlock`: makes the password-protected classes available.
struct UnlockCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unlock",
        abstract: "Unlock the keychain with its password.",
        discussion: """
            Unlocks every password-protected accessibility class, as logging in does on macOS. \
            A wrong password fails with errSecAuthFailed (-25293).

            Examples:
              latchkey unlock
              printf '%s\\n' "$PASSWORD" | latchkey unlock --password-stdin
            """)

    @Flag(
        name: .customLong("password-stdin"),
        help: "Read the password from the first line of standard input instead of prompting.")
    var passwordStdin = false

    func run() throws {
        let password: SecretBytes
        do throws(InputFailure) {
            password = try PasswordInput.existing(fromStandardInput: passwordStdin, prompt: "Keychain password: ")
        } catch {
            throw error.report()
        }
        do throws(KeychainControl.Failure) {
            try KeychainControl.unlock(password: password)
        } catch {
            throw controlFailure("KeychainControl.unlock", error)
        }
    }
}
