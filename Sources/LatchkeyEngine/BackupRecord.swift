import LatchkeyCodec
import LatchkeyModel
import LatchkeySecrets

/// One item as a backup carries it (docs/BACKUP.md §5): everything its row holds in the clear, nothing
/// tied to this keychain (no persistent reference, no keyed hash, no class key).
struct BackupRecord {
    var itemClass: ItemClass
    var protection: ProtectionClass
    var synchronizable: Bool
    /// Every sealed attribute, `agrp`, `accc` and the dates included.
    var attributes: SecDictionary
    var secret: [UInt8]
    var secretService: SecretServiceData?

    /// The record of an opened item and its secret.
    init(_ item: OpenItem, secret: [UInt8]) {
        itemClass = item.itemClass
        protection = item.protection
        synchronizable = item.row.synchronizable
        attributes = item.attributes
        self.secret = secret
        secretService = item.secretService
    }

    /// The record as a value: `{"class", "pdmn", "sync", "attrs", "data"[, "ss"]}`.
    var encoded: SecValue {
        var value: SecDictionary = [
            "class": .string(itemClass.name), "pdmn": .string(protection.pdmn),
            "sync": .bool(synchronizable), "attrs": .dictionary(attributes), "data": .data(secret),
        ]
        if let secretService { value["ss"] = secretService.encoded }
        return .dictionary(value)
    }

    /// Reads a record, checking what the engine relies on when it seals the item again: a known class,
    /// an accessibility that may leave the device, attributes the class has, an access group, and an
    /// access control that decodes and agrees with the accessibility. Anything else is a damaged backup.
    init(decoding value: SecValue) throws(SecError) {
        guard case .dictionary(let d) = value, d.count <= 6,
            case .string(let className)? = d["class"], let itemClass = ItemClass(name: className),
            case .string(let pdmn)? = d["pdmn"], let protection = ProtectionClass(pdmn: pdmn),
            case .bool(let synchronizable)? = d["sync"], case .dictionary(let attributes)? = d["attrs"],
            case .data(let secret)? = d["data"]
        else { throw Self.malformed("an item record is malformed") }
        guard !protection.isThisDeviceOnly else {
            throw Self.malformed("an item record has a ThisDeviceOnly accessibility, which a backup never holds")
        }
        for (name, value) in attributes {
            guard itemClass.attribute(name) != nil || name == SecAttr.accessControl else {
                throw Self.malformed("an item record has an attribute its class does not have")
            }
            switch value {
            case .string, .data, .int, .bool, .double, .date: continue
            case .array, .dictionary, .null: throw Self.malformed("an item record has an attribute that is not a value")
            }
        }
        guard case .string(let group)? = attributes[SecAttr.accessGroup], !group.isEmpty else {
            throw Self.malformed("an item record has no access group")
        }
        // The tokens' group holds what tokens provide, never rows (docs/APPLICATIONS.md, "Special groups"):
        // no SecItemAdd may write there, and no restore either.
        guard !Caller.sameAccessGroup(group, Caller.tokenAccessGroup) else {
            throw Self.malformed("an item record is in the tokens' access group")
        }
        guard attributes[SecAttr.accessible] == .string(protection.pdmn),
            attributes[SecAttr.synchronizable]?.integerValue == (synchronizable ? 1 : 0)
        else { throw Self.malformed("an item record's accessibility or sync state disagrees with its attributes") }
        if let control = attributes[SecAttr.accessControl] {
            guard case .data(let bytes) = control, let decoded = try? AccessControl(decoding: bytes),
                decoded.protection == protection, !synchronizable
            else { throw Self.malformed("an item record has a malformed access control") }
        }
        var secretService: SecretServiceData?
        if let ss = d["ss"] {
            guard itemClass == .genericPassword, let data = SecretServiceData(decoding: ss) else {
                throw Self.malformed("an item record has malformed Secret Service data")
            }
            secretService = data
        } else if d.count == 6 {
            throw Self.malformed("an item record is malformed")
        }
        self.itemClass = itemClass
        self.protection = protection
        self.synchronizable = synchronizable
        self.attributes = attributes
        self.secret = secret
        self.secretService = secretService
    }

    /// Zeroes the secret and the attribute data in place (a key's bytes are its secret).
    mutating func wipe() {
        // Through the storage the decoded value shares, not a copy of it (`wipeDataInPlace`).
        SecValue.data(secret).wipeDataInPlace()
        SecValue.dictionary(attributes).wipeDataInPlace()
    }

    static func malformed(_ why: String) -> SecError {
        SecError(SecStatus.decode, "the backup is damaged: \(why)")
    }
}

/// How a chunk's plaintext holds its records: one value, an array of records (docs/BACKUP.md §5). The first
/// chunk may begin with `{"state": value}`, the Secret Service's collections and aliases.
enum BackupChunk {
    /// The key of the Secret Service state's entry.
    static let stateKey = "state"

    static func encode(_ records: [SecValue]) -> [UInt8] {
        ValueCodec.encode(.array(records))
    }

    /// The records of one chunk, and the Secret Service state when it is the chunk's first entry, decoded
    /// under the value codec's caps (docs/PROTOCOL.md §3).
    static func decode(_ plaintext: [UInt8], first: Bool) throws(SecError) -> ([BackupRecord], SecValue?) {
        let value: SecValue
        do {
            value = try ValueCodec.decode(plaintext)
        } catch {
            throw BackupRecord.malformed("a chunk does not hold a list of items")
        }
        // Not wiped here: the records share the value's data buffers; the restore wipes them when done.
        guard case .array(var values) = value else { throw BackupRecord.malformed("a chunk does not hold a list") }
        var state: SecValue?
        if first, case .dictionary(let d)? = values.first, d.count == 1, let found = d[stateKey] {
            state = found
            values.removeFirst()
        }
        var records: [BackupRecord] = []
        records.reserveCapacity(values.count)
        do {
            for entry in values { records.append(try BackupRecord(decoding: entry)) }
        } catch {
            // The records decoded so far share the value's buffers: wipe the chunk's secrets before failing.
            value.wipeDataInPlace()
            throw error
        }
        return (records, state)
    }
}
