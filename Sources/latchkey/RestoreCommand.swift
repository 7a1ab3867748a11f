import ArgumentParser
import Latchkey
import LatchkeyCrypto
import LatchkeySecrets

#if canImport(Glibc)
    import Glibc
#endif

/// `latchkey restore`: merges a backup's items into this keychain (docs/BACKUP.md §6).
struct RestoreCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restore",
        abstract: "Merge the items of a backup file into the keychain.",
        discussion: """
            Reads a file written by 'latchkey backup', on this or any other machine, and adds its \
            items to the keychain in one transaction. An item the keychain already holds (the same \
            class and primary key, as Apple's SecItemAdd decides) is a duplicate: --replace puts the \
            backup's item in its place, --skip keeps the keychain's; otherwise each duplicate is \
            asked about on the terminal, and with --no-ui any duplicate makes the restore fail.

            Nothing changes unless everything succeeds: a wrong passphrase, a damaged or truncated \
            file, a file from a newer latchkey, or a refused duplicate leaves the keychain as it was.

            The restore asks for the keychain password (it writes into every access group) and the \
            backup passphrase; with --passphrase-stdin and --keychain-password-fd 0 the passphrase is \
            the first line of standard input and the keychain password the second.

            Examples:
              latchkey restore keychain.lkbackup
              latchkey restore --skip keychain.lkbackup
            """)

    @Argument(help: ArgumentHelp("The backup file.", valueName: "file"))
    var file: String

    @Flag(name: .customLong("replace"), help: "Replace the items the keychain already holds.")
    var replace = false

    @Flag(name: .customLong("skip"), help: "Keep the items the keychain already holds.")
    var skip = false

    @Flag(name: .customLong("no-ui"), help: "Never ask: without --replace or --skip, a duplicate fails the restore.")
    var noUI = false

    @OptionGroup var secrets: BackupSecretOptions

    func validate() throws {
        if replace && skip { throw ValidationError("give --replace or --skip, not both") }
    }

    func run() throws {
        let bytes: [UInt8]
        let passphrase: SecretBytes
        let password: SecretBytes
        do throws(InputFailure) {
            bytes = try BackupFiles.read(file, limit: BackupFile.maximumFileSize)
            // The header first: a file that is not a backup, or from a newer latchkey, is refused before
            // any secret is asked for.
            do {
                _ = try BackupHeader.read(bytes)
            } catch {
                throw InputFailure("\(file): \(error.message)")
            }
            passphrase = try secrets.passphrase(confirm: false)
            password = try secrets.keychainPassword("to restore into every access group")
        } catch {
            throw error.report()
        }
        let key: SecretBytes
        var duplicates: [KeychainControl.BackupDuplicate] = []
        do throws(KeychainControl.Failure) {
            key = try KeychainControl.backupKey(for: bytes, passphrase: passphrase)
            if !replace && !skip && !noUI {
                duplicates = try KeychainControl.checkRestore(file: bytes, key: key, password: password).duplicates
            }
        } catch {
            throw controlFailure("KeychainControl.restore", error)
        }
        let handling: KeychainControl.DuplicateHandling
        if replace {
            handling = .replaceAll
        } else if skip {
            handling = .skipAll
        } else if noUI || duplicates.isEmpty {
            handling = .refuse
        } else {
            do throws(InputFailure) {
                handling = try ask(about: duplicates)
            } catch {
                throw error.report()
            }
        }
        do throws(KeychainControl.Failure) {
            let summary = try KeychainControl.restore(file: bytes, key: key, password: password, handling: handling)
            print(
                "restored \(summary.items) item(s) from \(file): \(summary.added) added, "
                    + "\(summary.replaced) replaced, \(summary.skipped) skipped")
        } catch {
            throw controlFailure("KeychainControl.restore", error)
        }
    }

    /// Asks on the terminal what to do with each duplicate, or once for all of them.
    private func ask(about duplicates: [KeychainControl.BackupDuplicate]) throws(InputFailure)
        -> KeychainControl.DuplicateHandling
    {
        let tty = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard tty >= 0 else {
            throw InputFailure(
                "\(duplicates.count) item(s) of the backup are already in the keychain and there is no "
                    + "terminal to ask on: give --replace or --skip; nothing was restored")
        }
        defer { close(tty) }
        var replace = Set<Int>()
        var skip = Set<Int>()
        say(tty, "\(duplicates.count) item(s) of the backup are already in the keychain.\n")
        for (position, duplicate) in duplicates.enumerated() {
            while true {
                say(
                    tty,
                    "\(duplicate.itemClass) \(duplicate.summary): replace it? "
                        + "[y]es, [n]o (keep), [a]ll replace, [s]kip all, [q]uit: ")
                let answer = readAnswer(tty)
                let rest = duplicates[position...].map(\.index)
                switch answer {
                case "y", "yes": replace.insert(duplicate.index)
                case "n", "no": skip.insert(duplicate.index)
                case "a", "all":
                    return .decided(replace: replace.union(rest), skip: skip)
                case "s", "skip":
                    return .decided(replace: replace, skip: skip.union(rest))
                case "q", "quit", nil:
                    throw InputFailure("restore cancelled; nothing was restored")
                default:
                    continue
                }
                break
            }
        }
        return .decided(replace: replace, skip: skip)
    }

    private func say(_ fd: Int32, _ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress!, $0.count) }
    }

    /// One line from the terminal, lowercased; nil at end of file.
    private func readAnswer(_ fd: Int32) -> String? {
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while true {
            let n = read(fd, &byte, 1)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return line.isEmpty ? nil : String(decoding: line, as: UTF8.self).lowercased() }
            if byte == UInt8(ascii: "\n") { break }
            if line.count < 64 { line.append(byte) }
        }
        return String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespaces).lowercased()
    }
}
