import ArgumentParser
import Latchkey
import LatchkeySecrets

#if canImport(Glibc)
    import Glibc
#endif

/// The two secrets `backup` and `restore` need: the backup passphrase (`--passphrase-stdin`, or asked on
/// the terminal) and the keychain password (`--keychain-password-fd`, or asked on the terminal). When both
/// come from standard input (`--passphrase-stdin --keychain-password-fd 0`), the passphrase is the first
/// line and the keychain password the second.
struct BackupSecretOptions: ParsableArguments {
    @Flag(
        name: .customLong("passphrase-stdin"),
        help: "Read the backup passphrase from the first line of standard input (without its newline).")
    var passphraseStdin = false

    @Option(
        name: .customLong("keychain-password-fd"),
        help: ArgumentHelp(
            "Read the keychain password from this file descriptor (one line) instead of the terminal.",
            valueName: "fd"))
    var keychainPasswordFD: Int32?

    func validate() throws {
        if let fd = keychainPasswordFD, fd < 0 { throw ValidationError("--keychain-password-fd needs a descriptor") }
    }

    /// The backup passphrase; `confirm` asks twice on the terminal (a new backup's). Never empty.
    func passphrase(confirm: Bool) throws(InputFailure) -> SecretBytes {
        let value: SecretBytes
        if passphraseStdin {
            guard let line = try PasswordInput.readLine(from: STDIN_FILENO) else {
                throw InputFailure("no backup passphrase on standard input")
            }
            value = line
        } else if confirm {
            value = try PasswordInput.confirmed("Backup passphrase: ", "Retype the backup passphrase: ")
        } else {
            value = try PasswordInput.prompt("Backup passphrase: ")
        }
        guard value.count > 0 else { throw InputFailure("refusing an empty backup passphrase") }
        return value
    }

    /// The keychain password, which the agent asks of every backup and restore (they reach every group).
    func keychainPassword(_ why: String) throws(InputFailure) -> SecretBytes {
        if let fd = keychainPasswordFD {
            guard let line = try PasswordInput.readLine(from: fd) else {
                throw InputFailure("no keychain password on descriptor \(fd)")
            }
            return line
        }
        return try PasswordInput.prompt("keychain password (\(why)): ")
    }
}
