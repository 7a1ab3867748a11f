import LatchkeyCodec
import LatchkeyCrypto
import LatchkeyModel
import LatchkeySecrets
import LatchkeyStore

/// An item in the clear, as the engine works with it between the store and the caller.
struct OpenItem {
    var id: Int64
    var persistentRef: [UInt8]
    var itemClass: ItemClass
    var protection: ProtectionClass
    /// Every attribute, including `pdmn`, `sync`, `agrp`, the dates and defaulted primary-key attributes.
    var attributes: SecDictionary
    /// The item key, kept so the secret can be opened lazily (only when `kSecReturnData` asks for it).
    var itemKey: SecretBytes
    var row: StoreRow
    /// What a Secret Service item carries besides its genp attributes (docs/SECRET-SERVICE.md §1.1);
    /// nil for items made through SecItem. Never part of `attributes`, so SecItem callers never see it.
    var secretService: SecretServiceData? = nil
    /// The key of the item's application-password box, when the request's password gave it
    /// (`PresenceGate`); `ItemSealer.openSecret` needs it for such an item.
    var applicationKey: SecretBytes? = nil
    /// What a token item is (docs/TOKENS.md); nil for the store's items. A token item has no row: its
    /// `row` and `itemKey` are empty, and its data comes from here.
    var token: TokenItem? = nil
}

/// Seals and opens store rows, and computes the keyed hashes (docs/STORE.md, the normative description).
///
/// Each item has a fresh 256-bit item key. The key is wrapped with AES-256-GCM under the item's class key;
/// the attributes and the secret are sealed with AES-256-GCM under the item key. The associated data of
/// all three blobs binds them to the row's persistent reference, item class and protection class, so a
/// blob moved to another row, or a row whose class column was edited, fails authentication.
enum ItemSealer {
    enum Role: UInt8 {
        case wrappedKey = 1
        case metadata = 2
        case secret = 3
    }

    static let aadLabel = Array("latchkey item v1".utf8)

    static func aad(_ role: Role, ref: [UInt8], itemClass: ItemClass, protection: ProtectionClass) -> [UInt8] {
        aadLabel + [role.rawValue] + ref + [itemClass.rawValue, protection.rawValue]
    }

    /// Seals an item into a new store row.
    static func seal(
        ref: [UInt8], itemClass: ItemClass, protection: ProtectionClass, synchronizable: Bool,
        attributes: SecDictionary, secret: [UInt8], classKey: SecretBytes, indexKey: IndexKey,
        secretService: SecretServiceData? = nil
    ) throws -> NewRow {
        try seal(
            ref: ref, itemClass: itemClass, protection: protection, synchronizable: synchronizable,
            attributes: attributes, secret: secret, classKey: classKey, indexKey: indexKey,
            secretService: secretService, itemKey: try SecureRandom.secret(AES256GCM.keySize), nonces: nil)
    }

    /// The nonces of an item's three blobs, when they are given rather than drawn.
    struct Nonces {
        var wrappedKey: [UInt8]
        var metadata: [UInt8]
        var secret: [UInt8]
    }

    /// `seal` with the item key given, and the three nonces too (drawn at random when `nonces` is nil).
    /// Only the test vectors of docs/STORE.md give nonces, to reproduce their blobs through this code:
    /// a nonce used twice under one key would break GCM.
    static func seal(
        ref: [UInt8], itemClass: ItemClass, protection: ProtectionClass, synchronizable: Bool,
        attributes: SecDictionary, secret: [UInt8], classKey: SecretBytes, indexKey: IndexKey,
        secretService: SecretServiceData?, itemKey: SecretBytes, nonces: Nonces?
    ) throws -> NewRow {
        let wrapped = try AES256GCM.seal(
            itemKey, key: classKey,
            aad: aad(.wrappedKey, ref: ref, itemClass: itemClass, protection: protection),
            nonce: nonces?.wrappedKey)
        var encoded: [UInt8] = []
        var sealed = attributes
        if let secretService { sealed[SecretServiceData.key] = secretService.encoded }
        ValueCodec.encode(.dictionary(sealed), into: &encoded)
        let metadata = try AES256GCM.seal(
            encoded, key: itemKey,
            aad: aad(.metadata, ref: ref, itemClass: itemClass, protection: protection),
            nonce: nonces?.metadata)
        SecretBytes.wipe(&encoded)
        let sealedSecret = try AES256GCM.seal(
            secret, key: itemKey,
            aad: aad(.secret, ref: ref, itemClass: itemClass, protection: protection),
            nonce: nonces?.secret)
        return NewRow(
            persistentRef: ref, itemClass: Int(itemClass.rawValue), protection: Int(protection.rawValue),
            synchronizable: synchronizable,
            uniqueHash: try uniqueHash(
                itemClass: itemClass, attributes: attributes, indexKey: indexKey,
                discriminator: SecretServiceMapping.discriminator(secretService)),
            wrappedKey: wrapped, metadata: metadata, secret: sealedSecret,
            indexHashes: try indexHashes(
                itemClass: itemClass, attributes: attributes, indexKey: indexKey,
                secretService: secretService))
    }

    /// Opens a row's item key and attributes. Any authentication failure is errSecDecode: the row was
    /// damaged or tampered with, and its contents are never returned.
    static func open(_ row: StoreRow, keys: KeyState) throws(SecError) -> OpenItem {
        guard let itemClass = ItemClass(rawValue: UInt8(clamping: row.itemClass)),
            let protection = ProtectionClass(rawValue: UInt8(clamping: row.protection))
        else {
            throw SecError(SecStatus.decode, "item row \(row.id) has an unknown class")
        }
        let classKey = try keys.key(for: protection)
        do {
            let itemKey = try AES256GCM.openSecret(
                row.wrappedKey, key: classKey,
                aad: aad(.wrappedKey, ref: row.persistentRef, itemClass: itemClass, protection: protection))
            var plain = try AES256GCM.open(
                row.metadata, key: itemKey,
                aad: aad(.metadata, ref: row.persistentRef, itemClass: itemClass, protection: protection))
            defer { SecretBytes.wipe(&plain) }
            guard case .dictionary(var attributes) = try ValueCodec.decode(plain) else {
                throw SecError(SecStatus.decode, "item row \(row.id) has malformed attributes")
            }
            var secretService: SecretServiceData?
            if let sealed = attributes.removeValue(forKey: SecretServiceData.key) {
                guard itemClass == .genericPassword, let data = SecretServiceData(decoding: sealed) else {
                    throw SecError(SecStatus.decode, "item row \(row.id) has malformed Secret Service data")
                }
                secretService = data
            }
            return OpenItem(
                id: row.id, persistentRef: row.persistentRef, itemClass: itemClass,
                protection: protection, attributes: attributes, itemKey: itemKey, row: row,
                secretService: secretService)
        } catch let error as SecError {
            throw error
        } catch {
            throw SecError(SecStatus.decode, "item row \(row.id) failed authentication (damaged or tampered)")
        }
    }

    /// Opens the secret of an opened item.
    static func openSecret(_ item: OpenItem) throws(SecError) -> [UInt8] {
        let stored = try openStoredSecret(item)
        guard try item.accessControl()?.flags.contains(.applicationPassword) == true else { return stored }
        // Sealed under an application password (docs/ACCESS-CONTROL.md §8): only its key opens it.
        guard let key = item.applicationKey else {
            throw SecError(SecStatus.interactionNotAllowed, "the item needs its application password")
        }
        return try ApplicationPassword.unwrap(stored, key: key)
    }

    /// The secret as stored: for an item with an application password, its box.
    static func openStoredSecret(_ item: OpenItem) throws(SecError) -> [UInt8] {
        if let token = item.token {
            // A token's private key never leaves the token; what the item holds is its public half.
            guard token.itemClass == .certificate || token.keyClass != KeyReference.classPrivate else {
                throw SecError(SecStatus.dataNotAvailable, "a token's private key never leaves the token")
            }
            return token.data
        }
        do {
            return try AES256GCM.open(
                item.row.secret, key: item.itemKey,
                aad: aad(.secret, ref: item.persistentRef, itemClass: item.itemClass, protection: item.protection))
        } catch {
            throw SecError(SecStatus.decode, "item row \(item.id) secret failed authentication (damaged or tampered)")
        }
    }

    // MARK: - Keyed hashes

    /// The hash of one attribute value, as stored in the item index and computed for queries.
    static func attributeHash(_ spec: AttributeSpec, _ value: SecValue, indexKey: IndexKey) throws -> [UInt8] {
        try indexKey.hash([0x41] + AttributeValue.canonicalBytes(spec, value))  // "A"
    }

    /// `attributeHash`, remembered by the key: for the access groups that scope every request of a caller.
    static func rememberedAttributeHash(_ spec: AttributeSpec, _ value: SecValue, indexKey: IndexKey) throws
        -> [UInt8]
    {
        try indexKey.remembered([0x41] + AttributeValue.canonicalBytes(spec, value))  // "A"
    }

    /// The uniqueness hash over the class's primary-key attributes, in schema order, followed by a
    /// Secret Service item's discriminator when it has one (docs/SECRET-SERVICE.md §3).
    static func uniqueHash(
        itemClass: ItemClass, attributes: SecDictionary, indexKey: IndexKey,
        discriminator: [UInt8]? = nil
    ) throws -> [UInt8] {
        var input: [UInt8] = [0x55, itemClass.rawValue]  // "U"
        for spec in itemClass.primaryKey {
            let bytes: [UInt8]
            if let value = attributes[spec.name] {
                bytes = [1] + AttributeValue.canonicalBytes(spec, value)
            } else {
                bytes = [0] + Array(spec.name.utf8)
            }
            let n = UInt32(bytes.count)
            input += [UInt8(n >> 24), UInt8((n >> 16) & 0xFF), UInt8((n >> 8) & 0xFF), UInt8(n & 0xFF)]
            input += bytes
        }
        if let discriminator { input += discriminator }
        return try indexKey.hash(input)
    }

    /// The index hashes of every attribute except those kept as plaintext columns (`pdmn`, `sync`),
    /// and for generic passwords the Secret Service hashes (docs/SECRET-SERVICE.md §2).
    static func indexHashes(
        itemClass: ItemClass, attributes: SecDictionary, indexKey: IndexKey,
        secretService: SecretServiceData? = nil
    ) throws -> [[UInt8]] {
        var hashes: [[UInt8]] = []
        for (name, value) in attributes where name != SecAttr.accessible && name != SecAttr.synchronizable {
            guard let spec = itemClass.attribute(name) else { continue }
            hashes.append(try attributeHash(spec, value, indexKey: indexKey))
        }
        if itemClass == .genericPassword {
            hashes += try SecretServiceMapping.indexHashes(
                attributes: attributes, sealed: secretService,
                indexKey: indexKey)
        }
        return hashes
    }

    /// Whether an opened item's attributes match every filter of a query (exact canonical equality).
    static func matches(_ item: OpenItem, _ filters: SecDictionary) -> Bool {
        for (name, wanted) in filters {
            guard let spec = item.itemClass.attribute(name), let stored = item.attributes[name],
                AttributeValue.canonicalBytes(spec, stored) == AttributeValue.canonicalBytes(spec, wanted)
            else {
                return false
            }
        }
        return true
    }
}
