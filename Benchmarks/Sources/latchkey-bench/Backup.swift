import Foundation
import Latchkey
import LatchkeySecrets

// `latchkey-bench --backup`: the time and memory of a backup and a restore (docs/BACKUP.md) at each size:
// the keychain is filled as for the SecItem figures, then backed up, the backup checked (opened and its
// duplicates looked up, nothing written) and restored over itself with every item replaced (each item
// sealed again and written: the work of a restore into an empty keychain, plus the look-up). The backup
// key's Argon2id runs with cheap parameters: a derivation is a constant, not what grows with the items.

func runBackupBenchmark(options: Options, machine: String, workload: Workload, agentPID: pid_t) {
    let password = SecretBytes(copying: Array("latchkey-bench".utf8))
    let passphrase = SecretBytes(copying: Array("backup passphrase".utf8))
    let cheap = KeychainControl.Argon2Options(timeCost: 1, memoryKiB: 8_192, parallelism: 1, allowWeak: true)
    var rows: [[String]] = []
    for size in options.sizes {
        FileHandle.standardError.write(Data("latchkey-bench: filling to \(grouped(size)) items…\n".utf8))
        _ = workload.fill(to: size)
        FileHandle.standardError.write(Data("latchkey-bench: backup and restore at \(grouped(size)) items…\n".utf8))
        var start = nanoseconds()
        let file: [UInt8]
        do {
            file = try KeychainControl.backup(password: password, passphrase: passphrase, options: cheap).file
        } catch {
            fail("backup at \(size) items: status \(error.status): \(error.detail ?? "")")
        }
        let backupSeconds = Double(nanoseconds() - start) / 1e9
        let key: SecretBytes
        do {
            key = try KeychainControl.backupKey(for: file, passphrase: passphrase)
        } catch {
            fail("backup key: status \(error.status): \(error.detail ?? "")")
        }
        start = nanoseconds()
        let checked: KeychainControl.RestoreSummary
        do {
            checked = try KeychainControl.checkRestore(file: file, key: key, password: password)
        } catch {
            fail("checking the restore at \(size) items: status \(error.status): \(error.detail ?? "")")
        }
        let checkSeconds = Double(nanoseconds() - start) / 1e9
        start = nanoseconds()
        do {
            let done = try KeychainControl.restore(file: file, key: key, password: password, handling: .replaceAll)
            guard done.replaced == size, checked.duplicates.count == size else {
                fail("the restore replaced \(done.replaced) of \(size) items")
            }
        } catch {
            fail("restore at \(size) items: status \(error.status): \(error.detail ?? "")")
        }
        let restoreSeconds = Double(nanoseconds() - start) / 1e9
        let memory = agentMemory(agentPID)
        rows.append([
            grouped(size), String(format: "%.2f s", backupSeconds), mebibytes(file.count / 1_024),
            String(format: "%.2f s", checkSeconds), String(format: "%.2f s", restoreSeconds),
            memory.map { mebibytes($0.hwmKiB) } ?? "?", loadAverage(),
        ])
    }
    print("")
    print("latchkey backup and restore end to end (CLI library → socket → latchkeyd → SQLite), one run per size")
    print("  " + machine)
    print("")
    let header = [
        "items", "backup", "file", "check (no write)", "restore (replace all)", "agent VmHWM", "load 1/5/15 min",
    ]
    printTable(rows, header: header)
    guard options.markdown else { return }
    print("")
    print("| " + header.joined(separator: " | ") + " |")
    print("|" + header.map { _ in "---:" }.joined(separator: "|") + "|")
    for row in rows { print("| " + row.joined(separator: " | ") + " |") }
    print("")
    print("<sub>\(machine).</sub>")
}
