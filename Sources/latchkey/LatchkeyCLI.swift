import ArgumentParser

#if canImport(Glibc)
    import Glibc
#endif

/// The `latchkey` command: manages the user's session keychain through the agent, with verbs modelled
/// on macOS `security`.
@main
struct LatchkeyCLI: ParsableCommand {
    /// The command's version, printed by `latchkey version` and `latchkey --version`.
    static let version = "0.1.0"

    static let configuration = CommandConfiguration(
        commandName: "latchkey",
        abstract: "Manage the latchkey session keychain (Apple SecItem semantics on Linux).",
        discussion: """
            The keychain lives in $XDG_DATA_HOME/latchkey (default ~/.local/share/latchkey). Its keys \
            are held by the agent latchkeyd, which latchkey starts on demand.

            Exit status: 0 on success; 44 if no item matched (errSecItemNotFound, as macOS \
            'security' exits); 1 for any other keychain failure; 64 for a usage error. Failures are \
            reported on standard error as 'latchkey: <function>: <message> (<OSStatus>)'.

            See latchkey(1) and latchkeyd(8).
            """,
        version: "latchkey \(LatchkeyCLI.version)",
        subcommands: [
            InitCommand.self,
            UnlockCommand.self,
            LockCommand.self,
            StatusCommand.self,
            PasswdCommand.self,
            AddGenericPassword.self,
            FindGenericPassword.self,
            DeleteGenericPassword.self,
            AddInternetPassword.self,
            FindInternetPassword.self,
            DeleteInternetPassword.self,
            DumpKeychain.self,
            ImportCommand.self,
            ExportCommand.self,
            MigrateCommand.self,
            FindCertificate.self,
            FindIdentity.self,
            FindKey.self,
            DeleteCertificate.self,
            GenerateKey.self,
            AppsCommand.self,
            BackupCommand.self,
            RestoreCommand.self,
            VersionCommand.self,
            TokensCommand.self,
        ]
    )

    /// Parses and runs, after turning a trailing `-w` of the add verbs into `--prompt` (see
    /// `rewriteTrailingPasswordFlag`), since ArgumentParser has no options with an optional value.
    static func main() {
        let raw: [String]
        switch RawArguments.decoded() {
        case .success(let arguments):
            raw = arguments
        case .failure(let invalid):
            printError(
                "argument \(invalid.position) is not valid UTF-8: '\(invalid.escaped)' (item attributes and "
                    + "options must be UTF-8 text)")
            Glibc.exit(ExitStatus.usage)
        }
        let arguments = rewriteTrailingPasswordFlag(raw)
        do {
            var command = try parseAsRoot(arguments)
            try command.run()
        } catch {
            exit(withError: error)
        }
    }

    /// macOS `security add-*-password ... -w` with nothing after `-w` prompts for the password; the
    /// same spelling here becomes the `--prompt` flag.
    static func rewriteTrailingPasswordFlag(_ arguments: [String]) -> [String] {
        guard let verb = arguments.first,
            verb == AddGenericPassword.configuration.commandName
                || verb == AddInternetPassword.configuration.commandName,
            arguments.count > 1, arguments.last == "-w"
        else { return arguments }
        return arguments.dropLast() + ["--prompt"]
    }
}
