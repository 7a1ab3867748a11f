import LatchkeyCrypto
import LatchkeyEngine
import LatchkeyModel
import LatchkeySecretService
import LatchkeySecrets
import LatchkeySystem
import LatchkeyWire

/// A restore's file as it arrives on one connection (docs/PROTOCOL.md "restore"): only a connection that
/// gave the keychain password has one, and it holds at most the size declared then, which is at most
/// `BackupFile.maximumFileSize`. It is ciphertext; the key that opens it is kept with it.
struct RestoreUpload: Sendable {
    let password: SecretBytes
    let key: SecretBytes
    let size: Int
    var bytes: [UInt8] = []
    /// The upload's share of `RestoreRoom`, given back when the last copy of the upload goes (the
    /// connection closes, the restore ends or another begins).
    let room: RestoreRoom.Share
}

/// How much restore files the agent holds at once, over every connection: at most one file's worth
/// (`BackupFile.maximumFileSize`), so however many connections gave the keychain password, the agent's
/// memory for uploads stays bounded. A `"begin"` that does not fit is refused as busy.
enum RestoreRoom {
    static let capacity = BackupFile.maximumFileSize
    private static let held = Locked(0)

    /// A share of the room; its `deinit` gives it back.
    final class Share: Sendable {
        let bytes: Int
        fileprivate init(_ bytes: Int) { self.bytes = bytes }
        deinit { RestoreRoom.held.withLock { $0 -= bytes } }
    }

    /// `bytes` of the room, or nil when they do not fit beside what other restores hold.
    static func take(_ bytes: Int) -> Share? {
        let fits = held.withLock { held -> Bool in
            guard held + bytes <= capacity else { return false }
            held += bytes
            return true
        }
        return fits ? Share(bytes) : nil
    }
}

/// `backup` and `restore` (docs/BACKUP.md): the agent reads and writes the items, seals and opens the
/// file; what crosses the socket is the file's ciphertext, never an item in the clear.
extension AgentService {
    /// A restore's file arrives in requests of at most this many bytes of it.
    package static let restoreDataPerRequest = 512 * 1024

    /// `backup`: the whole file and how many items it holds.
    func backup(password: SecretBytes, key: SecretBytes, options: SecDictionary, caller: Caller) throws(SecError)
        -> SecValue
    {
        guard case .data(let salt)? = options["salt"], salt.count == BackupHeader.saltLength else {
            throw .param("a backup needs a \(BackupHeader.saltLength)-byte salt")
        }
        var parameters = BackupHeader.defaultParameters
        func number(_ name: String) throws(SecError) -> UInt32? {
            guard let value = options[name] else { return nil }
            guard case .int(let n) = value, let v = UInt32(exactly: n) else {
                throw .param("option \(name) must be a number")
            }
            return v
        }
        if let t = try number("argon2.t") { parameters.timeCost = t }
        if let m = try number("argon2.m") { parameters.memoryKiB = m }
        if let p = try number("argon2.p") { parameters.parallelism = p }
        let header = BackupHeader(parameters: parameters, salt: salt)
        // What this agent writes, it (and any other) must be able to read back: the restore's limits.
        do {
            _ = try BackupHeader.read(header.fields + [UInt8](repeating: 0, count: 32))
        } catch {
            throw .param(error.message)
        }
        if parameters.memoryKiB < BackupHeader.minimumMemoryKiB && options["argon2.allowWeak"] != .bool(true) {
            throw .param("Argon2id memory below \(BackupHeader.minimumMemoryKiB) KiB is too weak for a backup")
        }
        let (file, items) = try keychain.backup(password: password, key: key, header: header)
        AgentLog.info("backup of \(items) item(s), \(file.count) bytes, for pid \(caller.pid)")
        return .dictionary(["file": .data(file), "items": .int(Int64(items))])
    }

    /// One step of `restore`; `upload` is the connection's file so far.
    func restore(
        password: SecretBytes, key: SecretBytes, options: SecDictionary, caller: Caller,
        upload: inout RestoreUpload?
    ) throws(SecError) -> SecValue? {
        guard case .string(let step)? = options["step"] else { throw .param("restore needs a step") }
        switch step {
        case "begin":
            upload = nil
            guard key.count == Request.backupKeyLength else { throw .param("restore begins with the backup key") }
            guard case .int(let declared)? = options["size"], declared > 0,
                declared <= Int64(BackupFile.maximumFileSize)
            else { throw .param("a backup file is 1 to \(BackupFile.maximumFileSize) bytes") }
            // Before the agent keeps anything for the connection: only the keychain password's holder may
            // make it hold a file (and write into every group with it).
            do {
                try keychain.verify(password: password)
            } catch {
                AgentLog.warning("pid \(caller.pid) gave a wrong keychain password for a restore")
                throw error
            }
            guard let room = RestoreRoom.take(Int(declared)) else {
                throw SecError(SecStatus.badReq, "busy: another restore holds its file; try again when it ends")
            }
            var begun = RestoreUpload(password: password, key: key, size: Int(declared), room: room)
            begun.bytes.reserveCapacity(begun.size)
            upload = begun
            return nil
        case "data":
            guard var current = upload else { throw .param("no restore was begun on this connection") }
            guard case .data(let bytes)? = options["bytes"], !bytes.isEmpty,
                bytes.count <= Self.restoreDataPerRequest, current.bytes.count + bytes.count <= current.size
            else {
                upload = nil
                throw .param(
                    "restore data beyond the size declared, or more than \(Self.restoreDataPerRequest) bytes at once")
            }
            upload = nil  // the array is uniquely referenced while it grows
            current.bytes += bytes
            upload = current
            return nil
        case "check", "commit":
            guard let current = upload, current.bytes.count == current.size else {
                upload = nil
                throw .param("the restore's file has not all arrived")
            }
            upload = nil
            let decisions = step == "commit" ? try Self.decisions(options) : nil
            let outcome = try keychain.restore(
                current.bytes, key: current.key, password: current.password, decisions: decisions,
                mergeState: SecretServiceState.mergedForRestore)
            if decisions != nil {
                AgentLog.info(
                    "restore for pid \(caller.pid): \(outcome.added) added, \(outcome.replaced) replaced, "
                        + "\(outcome.skipped) skipped of \(outcome.items)")
            }
            return .dictionary([
                "items": .int(Int64(outcome.items)), "added": .int(Int64(outcome.added)),
                "replaced": .int(Int64(outcome.replaced)), "skipped": .int(Int64(outcome.skipped)),
                "duplicates": .array(
                    outcome.duplicates.map {
                        .dictionary([
                            "index": .int(Int64($0.index)), "class": .string($0.itemClass),
                            "summary": .string($0.summary),
                        ])
                    }),
            ])
        default:
            throw .param("unknown restore step")
        }
    }

    /// The duplicates' fates: `"otherwise"` (`"replace"`, `"skip"`, or absent: refuse), and the indices
    /// in `"replace"` and `"skip"`.
    private static func decisions(_ options: SecDictionary) throws(SecError) -> RestoreDecisions {
        var decisions = RestoreDecisions(otherwise: nil)
        switch options["otherwise"] {
        case nil: break
        case .string("replace")?: decisions.otherwise = .replace
        case .string("skip")?: decisions.otherwise = .skip
        default: throw .param("otherwise is replace or skip")
        }
        func indices(_ name: String) throws(SecError) -> Set<Int> {
            guard let value = options[name] else { return [] }
            guard case .array(let list) = value else { throw .param("\(name) is a list of item numbers") }
            var set = Set<Int>()
            for entry in list {
                guard case .int(let n) = entry, n >= 0, n < Int64(Int32.max) else {
                    throw .param("\(name) is a list of item numbers")
                }
                set.insert(Int(n))
            }
            return set
        }
        decisions.replace = try indices("replace")
        decisions.skip = try indices("skip")
        guard decisions.replace.isDisjoint(with: decisions.skip) else {
            throw .param("an item cannot be both replaced and skipped")
        }
        return decisions
    }
}
