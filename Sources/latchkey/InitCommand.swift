import ArgumentParser
import Latchkey
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
        help: ArgumentHelp("Argon2id memory in MiB (at least 64, at most 1024; default 256).", valueName: "MiB"))
    var memoryMiB: UInt32?

    @Option(
        name: .customLong("argon2-time"),
        help: ArgumentHelp("Argon2id passes over memory, 1 to 16 (default 2).", valueName: "N"))
    var timeCost: UInt32?

    @Option(
        name: .customLong("argon2-parallelism"),
        help: ArgumentHelp("Argon2id lanes, 1 to 8 (default 2).", valueName: "N"))
    var parallelism: UInt32?

    /// Lets tests create keychains with cheap parameters; never for real keychains.
    @Flag(name: .customLong("allow-weak-argon2"), help: .hidden)
    var allowWeak = false

    func validate() throws {
        if let memoryMiB {
            guard memoryMiB <= 1024 else { throw ValidationError("--argon2-memory must be at most 1024 MiB") }
            guard memoryMiB >= 64 || (allowWeak && memoryMiB >= 1) else {
                throw ValidationError("--argon2-memory must be at least 64 MiB")
            }
        }
        if let timeCost, !(1...16).contains(timeCost) {
            throw ValidationError("--argon2-time must be between 1 and 16")
        }
        if let parallelism, !(1...8).contains(parallelism) {
            throw ValidationError("--argon2-parallelism must be between 1 and 8")
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
