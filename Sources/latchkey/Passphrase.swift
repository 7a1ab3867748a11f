import ArgumentParser
import LatchkeySecrets

#if canImport(Glibc)
    import Glibc
#endif

/// Where the passphrase of a PKCS#12 file or an encrypted key comes from: `--passphrase-stdin`,
/// `-P PASSPHRASE` (as macOS `security import` and `export` spell it), or a prompt on the terminal.
struct PassphraseOptions: ParsableArguments {
    @Flag(
        name: .customLong("passphrase-stdin"),
        help: "Read the passphrase from the first line of standard input (without its newline).")
    var passphraseStdin = false

    @Option(
        name: .customShort("P"),
        help: ArgumentHelp(
            "The passphrase, given on the command line.",
            discussion: """
                Anything on a command line can be read by other users in /proc and with ps(1), \
                and may end up in your shell history: prefer --passphrase-stdin, or leave both \
                out to be prompted on the terminal.
                """,
            valueName: "passphrase"))
    var passphrase: String?

    func validate() throws {
        if passphraseStdin && passphrase != nil {
            throw ValidationError("give the passphrase only one way: -P or --passphrase-stdin")
        }
    }

    /// True when the passphrase was given (rather than to be prompted for).
    var isGiven: Bool { passphraseStdin || passphrase != nil }
}

/// The passphrase of one command, read when first needed and then kept (standard input can be
/// read only once).
final class Passphrase {
    private let options: PassphraseOptions
    private var cached: SecretBytes?

    init(_ options: PassphraseOptions) {
        self.options = options
    }

    /// True when the command line gave the passphrase (it is then used at once, never asked for).
    var isGiven: Bool { options.isGiven }

    /// The passphrase that opens `what`: from the options, or asked once on the terminal. May be
    /// empty (PKCS#12 files without a password have one).
    func toOpen(_ what: String) throws(InputFailure) -> SecretBytes {
        try obtain(what) { () throws(InputFailure) in try PasswordInput.prompt("Passphrase for \(what): ") }
    }

    /// A new passphrase that protects `what`: from the options, or asked twice on the terminal.
    /// Empty passphrases are refused: they would leave the private key readable to anyone.
    func toProtect(_ what: String) throws(InputFailure) -> SecretBytes {
        let value = try obtain(what) { () throws(InputFailure) in
            try PasswordInput.confirmed("Passphrase to protect \(what): ", "Retype the passphrase: ")
        }
        guard value.count > 0 else {
            cached = nil
            throw InputFailure("refusing an empty passphrase for \(what)")
        }
        return value
    }

    /// The kept passphrase, or the one from the options, or `ask` on the terminal; kept afterwards.
    private func obtain(_ what: String, ask: () throws(InputFailure) -> SecretBytes) throws(InputFailure) -> SecretBytes
    {
        if let cached { return cached }
        let value: SecretBytes
        if let given = try fromOptions() {
            value = given
        } else {
            try requireTerminal(what)
            value = try ask()
        }
        cached = value
        return value
    }

    private func fromOptions() throws(InputFailure) -> SecretBytes? {
        if let passphrase = options.passphrase { return SecretBytes(copying: Array(passphrase.utf8)) }
        if options.passphraseStdin {
            guard let line = try PasswordInput.readLine(from: STDIN_FILENO) else {
                throw InputFailure("no passphrase on standard input")
            }
            return line
        }
        return nil
    }

    /// Fails with a message that names the options when there is no terminal to prompt on (a script,
    /// a test), instead of PasswordInput's generic one.
    private func requireTerminal(_ what: String) throws(InputFailure) {
        let fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard fd >= 0 else {
            throw InputFailure(
                "\(what) needs a passphrase and there is no terminal to ask on; "
                    + "give it with --passphrase-stdin (or -P)")
        }
        close(fd)
    }
}
