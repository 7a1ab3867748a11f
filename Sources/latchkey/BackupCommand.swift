import ArgumentParser
import Latchkey
import LatchkeyCrypto
import LatchkeySecrets

/// `latchkey backup`: one encrypted file with every item that may leave this machine (docs/BACKUP.md).
struct BackupCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup",
        abstract: "Write an encrypted backup of the keychain to a file.",
        discussion: """
            Writes every item except those whose accessibility is ...ThisDeviceOnly (as Apple's \
            backups do): generic and internet passwords, keys, certificates, in every access group, \
            with all their attributes (access control included) and the Secret Service's \
            collections and attributes. The file is encrypted and authenticated with AES-256-GCM \
            under a key derived from a backup passphrase with Argon2id; 'latchkey restore' reads it \
            on any machine.

            The backup asks for the keychain password as well (it holds every access group's \
            secrets), and the keychain must be unlocked. The backup passphrase is asked twice on the \
            terminal, or read from standard input with --passphrase-stdin; with \
            --keychain-password-fd 0 as well, the passphrase is the first line and the keychain \
            password the second.

            The file is written with mode 0600 to a new file beside FILE and moved into place when \
            complete; an existing FILE is kept unless --force.

            Examples:
              latchkey backup -o keychain.lkbackup
              printf '%s\\n%s\\n' "$PASSPHRASE" "$KEYCHAIN_PASSWORD" | \\
                latchkey backup -o keychain.lkbackup --passphrase-stdin --keychain-password-fd 0
            """)

    @Option(
        name: [.customShort("o"), .customLong("output")], help: ArgumentHelp("The backup file.", valueName: "file"))
    var output: String

    @Flag(name: .customLong("force"), help: "Replace FILE if it exists.")
    var force = false

    @OptionGroup var secrets: BackupSecretOptions

    @Option(
        name: .customLong("argon2-memory"),
        help: ArgumentHelp("Argon2id memory in MiB (at least 64, at most 512; default 256).", valueName: "MiB"))
    var memoryMiB: UInt32?

    @Option(
        name: .customLong("argon2-time"),
        help: ArgumentHelp("Argon2id passes over memory, 1 to 8 (default 3).", valueName: "N"))
    var timeCost: UInt32?

    @Option(
        name: .customLong("argon2-parallelism"),
        help: ArgumentHelp("Argon2id lanes, 1 to 8 (default 2).", valueName: "N"))
    var parallelism: UInt32?

    /// Tests only: Argon2id memory below 64 MiB.
    @Flag(name: .customLong("argon2-allow-weak"), help: .hidden)
    var allowWeak = false

    func validate() throws {
        let most = BackupHeader.maximumParameters
        if let memoryMiB, memoryMiB == 0 || memoryMiB > most.memoryKiB / 1024 || (memoryMiB < 64 && !allowWeak) {
            throw ValidationError("--argon2-memory is 64 to \(most.memoryKiB / 1024) MiB")
        }
        if let timeCost, timeCost == 0 || timeCost > most.timeCost {
            throw ValidationError("--argon2-time is 1 to \(most.timeCost)")
        }
        if let parallelism, parallelism == 0 || parallelism > most.parallelism {
            throw ValidationError("--argon2-parallelism is 1 to \(most.parallelism)")
        }
    }

    func run() throws {
        let passphrase: SecretBytes
        let password: SecretBytes
        do throws(InputFailure) {
            passphrase = try secrets.passphrase(confirm: true)
            password = try secrets.keychainPassword("to back up every access group")
        } catch {
            throw error.report()
        }
        let result: (file: [UInt8], items: Int)
        do throws(KeychainControl.Failure) {
            result = try KeychainControl.backup(
                password: password, passphrase: passphrase,
                options: KeychainControl.Argon2Options(
                    timeCost: timeCost, memoryKiB: memoryMiB.map { $0 * 1024 }, parallelism: parallelism,
                    allowWeak: allowWeak))
        } catch {
            throw controlFailure("KeychainControl.backup", error)
        }
        do throws(InputFailure) {
            try BackupFiles.write(result.file, to: output, replace: force)
        } catch {
            throw error.report()
        }
        print("backed up \(result.items) item(s) to \(output)")
    }
}
