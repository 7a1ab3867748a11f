import ArgumentParser
import Latchkey
import LatchkeyCrypto
import LatchkeySecrets

/// `latchkey init`: creates the keychain.
struct InitCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "init",
        abstract: "Create the keychain, protected by a password.",
        discussion: """
            Creates the keybag and the item database in the keychain directory and leaves the keychain \
            unlocked. The agent derives the class keys from the password with Argon2id and forgets the \
            password. On a terminal you are asked for the password twice, with echo off. An empty \
            password is refused.

            The Argon2id defaults (256 MiB, 2 passes, 2 lanes) take a fraction of a second; raising \
            them makes guessing the password from a stolen keybag slower, and every unlock slower too.

            Examples:
              latchkey init
              printf '%s\\n' "$PASSWORD" | latchkey init --password-stdin
              latchkey init --argon2-memory 512 --argon2-time 4
            """)

    @Flag(
        name: .customLong("password-stdin"),
        help: "Read the password from the first line of standard input instead of prompting.")
    var passwordStdin = false

    @Option(
        name: .customLong("argon2-memory"),
        help: ArgumentHelp(
            "Argon2id memory in MiB (at least \(InitCommand.minimumMiB), at most \(InitCommand.maximumMiB); default 256).",
            valueName: "MiB"))
    var memoryMiB: UInt32?

    @Option(
        name: .customLong("argon2-time"),
        help: ArgumentHelp(
            "Argon2id passes over memory, 1 to \(Argon2Parameters.maximumDerivationTimeCost) (default 2).",
            valueName: "N"))
    var timeCost: UInt32?

    @Option(
        name: .customLong("argon2-parallelism"),
        help: ArgumentHelp(
            "Argon2id lanes, 1 to \(Argon2Parameters.maximumDerivationParallelism) (default 2).", valueName: "N"))
    var parallelism: UInt32?

    /// Lets tests create keychains with cheap parameters; never for real keychains.
    @Flag(name: .customLong("allow-weak-argon2"), help: .hidden)
    var allowWeak = false

    // The agent's limits (pam/keybag_limits.h, through LatchkeyCrypto), checked here too so that a
    // mistyped option is a usage error before any password is asked for.
    private static let minimumMiB = Argon2Parameters.minimumMemoryKiB / 1024
    private static let maximumMiB = Argon2Parameters.maximumDerivationMemoryKiB / 1024

    func validate() throws {
        if let memoryMiB {
            guard memoryMiB <= Self.maximumMiB else {
                throw ValidationError("--argon2-memory must be at most \(Self.maximumMiB) MiB")
            }
            guard memoryMiB >= Self.minimumMiB || (allowWeak && memoryMiB >= 1) else {
                throw ValidationError("--argon2-memory must be at least \(Self.minimumMiB) MiB")
            }
        }
        if let timeCost, !(1...Argon2Parameters.maximumDerivationTimeCost).contains(timeCost) {
            throw ValidationError("--argon2-time must be between 1 and \(Argon2Parameters.maximumDerivationTimeCost)")
        }
        if let parallelism, !(1...Argon2Parameters.maximumDerivationParallelism).contains(parallelism) {
            throw ValidationError(
                "--argon2-parallelism must be between 1 and \(Argon2Parameters.maximumDerivationParallelism)")
        }
    }

    func run() throws {
        let password: SecretBytes
        do throws(InputFailure) {
            password = try PasswordInput.new(
                fromStandardInput: passwordStdin,
                prompt: "New keychain password: ",
                confirmation: "Retype the new keychain password: ")
        } catch {
            throw error.report()
        }
        let options = KeychainControl.Argon2Options(
            timeCost: timeCost, memoryKiB: memoryMiB.map { $0 * 1024 },
            parallelism: parallelism, allowWeak: allowWeak)
        do throws(KeychainControl.Failure) {
            try KeychainControl.create(password: password, options: options)
        } catch {
            throw controlFailure("KeychainControl.create", error)
        }
        print("created the keychain; it is unlocked")
    }
}
