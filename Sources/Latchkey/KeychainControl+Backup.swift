import LatchkeyCrypto
import LatchkeyModel
import LatchkeySecrets
import LatchkeyWire

/// Backing up and restoring the keychain (docs/BACKUP.md). The backup passphrase's key is derived here,
/// in the caller's process, so the agent never runs an Argon2id a file chose; the agent seals and opens
/// the file, so no item crosses the socket in the clear.
extension KeychainControl {
    /// An item of a backup that the keychain already holds.
    public struct BackupDuplicate: Sendable, Equatable {
        /// Its position in the backup (from 0), which `DuplicateHandling.decided` names.
        public var index: Int
        /// Its `kSecClass`.
        public var itemClass: String
        /// Its label, service or server and account, for the user (control characters removed).
        public var summary: String
    }

    /// What a restore found or did.
    public struct RestoreSummary: Sendable, Equatable {
        /// Items in the backup.
        public var items = 0
        /// Items the keychain already held.
        public var duplicates: [BackupDuplicate] = []
        /// Items added, replaced and skipped (all 0 when the restore only looked).
        public var added = 0
        public var replaced = 0
        public var skipped = 0
    }

    /// What a restore does with items the keychain already holds.
    public enum DuplicateHandling: Sendable, Equatable {
        /// Any duplicate refuses the restore, which then changes nothing.
        case refuse
        /// Every duplicate is replaced by the backup's item.
        case replaceAll
        /// Every duplicate keeps the keychain's item.
        case skipAll
        /// These are replaced, these skipped; any other refuses the restore.
        case decided(replace: Set<Int>, skip: Set<Int>)
    }

    /// Argon2id parameters of a new backup; nil fields keep `BackupHeader.defaultParameters`.
    public static func backup(password: SecretBytes, passphrase: SecretBytes, options: Argon2Options = Argon2Options())
        throws(Failure) -> (file: [UInt8], items: Int)
    {
        var parameters = BackupHeader.defaultParameters
        if let t = options.timeCost { parameters.timeCost = t }
        if let m = options.memoryKiB { parameters.memoryKiB = m }
        if let p = options.parallelism { parameters.parallelism = p }
        let header: BackupHeader
        let key: SecretBytes
        do {
            header = try BackupHeader.new(parameters: parameters)
            key = try header.deriveKey(passphrase: passphrase)
        } catch {
            throw Failure(status: SecStatus.param, detail: "cannot derive the backup key: \(error)")
        }
        var request: SecDictionary = [
            "salt": .data(header.salt), "argon2.t": .int(Int64(parameters.timeCost)),
            "argon2.m": .int(Int64(parameters.memoryKiB)), "argon2.p": .int(Int64(parameters.parallelism)),
        ]
        if options.allowWeak { request["argon2.allowWeak"] = .bool(true) }
        guard case .dictionary(let d)? = try call(.backup(password: password, key: key, options: request)),
            case .data(let file)? = d["file"], case .int(let items)? = d["items"]
        else { throw Failure(status: SecStatus.decode, detail: "malformed backup reply") }
        return (file, Int(items))
    }

    /// The key that opens `file`: its header checked (format, version, Argon2id within the limits)
    /// before anything is derived, then Argon2id of `passphrase`. Whether the passphrase is right is
    /// known only once the agent opens the file.
    public static func backupKey(for file: [UInt8], passphrase: SecretBytes) throws(Failure) -> SecretBytes {
        let header: BackupHeader
        do {
            header = try BackupHeader.read(file)
        } catch {
            throw Failure(status: SecStatus.decode, detail: error.message)
        }
        guard file.count <= BackupFile.maximumFileSize else {
            throw Failure(status: SecStatus.decode, detail: BackupFileError.tooLarge(file.count).message)
        }
        do {
            return try header.deriveKey(passphrase: passphrase)
        } catch {
            throw Failure(status: SecStatus.param, detail: "cannot derive the backup key: \(error)")
        }
    }

    /// Opens `file` in the agent and says what a restore would find, changing nothing.
    public static func checkRestore(file: [UInt8], key: SecretBytes, password: SecretBytes) throws(Failure)
        -> RestoreSummary
    {
        try restoreSteps(file: file, key: key, password: password, final: ["step": .string("check")])
    }

    /// Merges the items of `file` into the keychain in one transaction: all of them or, on any failure
    /// (a damaged file, a duplicate `handling` refuses), none.
    public static func restore(
        file: [UInt8], key: SecretBytes, password: SecretBytes, handling: DuplicateHandling
    ) throws(Failure) -> RestoreSummary {
        var final: SecDictionary = ["step": .string("commit")]
        switch handling {
        case .refuse: break
        case .replaceAll: final["otherwise"] = .string("replace")
        case .skipAll: final["otherwise"] = .string("skip")
        case .decided(let replace, let skip):
            final["replace"] = .array(replace.sorted().map { .int(Int64($0)) })
            final["skip"] = .array(skip.sorted().map { .int(Int64($0)) })
        }
        return try restoreSteps(file: file, key: key, password: password, final: final)
    }

    /// Sends the file in pieces on one connection (begin, data…, then the final step) and reads the reply.
    private static func restoreSteps(
        file: [UInt8], key: SecretBytes, password: SecretBytes, final: SecDictionary
    ) throws(Failure) -> RestoreSummary {
        guard !file.isEmpty, file.count <= BackupFile.maximumFileSize else {
            throw Failure(status: SecStatus.decode, detail: BackupFileError.tooLarge(file.count).message)
        }
        let none = SecretBytes(count: 0)
        _ = try call(
            .restore(
                password: password, key: key,
                options: ["step": .string("begin"), "size": .int(Int64(file.count))]))
        var offset = 0
        let piece = 512 * 1024
        while offset < file.count {
            let end = min(file.count, offset + piece)
            _ = try call(
                .restore(
                    password: none, key: none,
                    options: ["step": .string("data"), "bytes": .data(Array(file[offset..<end]))]))
            offset = end
        }
        guard case .dictionary(let d)? = try call(.restore(password: none, key: none, options: final)) else {
            throw Failure(status: SecStatus.decode, detail: "malformed restore reply")
        }
        func number(_ name: String) -> Int { Int(d[name]?.integerValue ?? 0) }
        var summary = RestoreSummary(
            items: number("items"), added: number("added"), replaced: number("replaced"), skipped: number("skipped"))
        if case .array(let list)? = d["duplicates"] {
            for entry in list {
                guard case .dictionary(let e) = entry, case .int(let index)? = e["index"],
                    case .string(let cls)? = e["class"], case .string(let text)? = e["summary"]
                else { throw Failure(status: SecStatus.decode, detail: "malformed restore reply") }
                summary.duplicates.append(BackupDuplicate(index: Int(index), itemClass: cls, summary: text))
            }
        }
        return summary
    }
}
