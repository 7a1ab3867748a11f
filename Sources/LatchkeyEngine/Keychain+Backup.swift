import LatchkeyCodec
import LatchkeyCrypto
import LatchkeyModel
import LatchkeySecrets
import LatchkeyStore

extension Keychain {
    /// Rows read from the store at a time while a backup walks it.
    static let backupPage = 512

    /// Writes a backup of every item whose accessibility may leave the device (docs/BACKUP.md): every
    /// class, every access group, every attribute, the secret and the Secret Service data, sealed under
    /// `key` (the backup passphrase's, from `BackupHeader.deriveKey`) in chunks of about
    /// `BackupFile.targetChunk`. Returns the whole file, which holds only the header and ciphertext, and
    /// how many items it holds.
    ///
    /// `password` must be the keychain password (errSecAuthFailed otherwise, and nothing is read): a
    /// backup holds every group's secrets under a passphrase its caller chooses, so an unlocked keychain
    /// alone is not enough (docs/SECURITY.md). Every class a backup reads must be unlocked
    /// (errSecInteractionNotAllowed otherwise): a backup that silently left out locked items would be
    /// found incomplete only when it is needed. Items with `kSecAttrAccessControl` are included without a
    /// user check, as Apple's backups include them: the keychain password is the stronger proof.
    package func backup(password: SecretBytes, key: SecretBytes, header: BackupHeader) throws(SecError)
        -> (file: [UInt8], items: Int)
    {
        try lockState.verify(password: password)
        return try lockState.withStore { (store, keys) throws(SecError) -> ([UInt8], Int) in
            do {
                // One read transaction: the backup is one snapshot of the store.
                return try store.reading { try Self.writeBackup(store: store, keys: keys, key: key, header: header) }
            } catch {
                throw EngineErrors.map(error)
            }
        }
    }

    private static func writeBackup(store: Store, keys: KeyState, key: SecretBytes, header: BackupHeader) throws
        -> ([UInt8], Int)
    {
        var writer = try BackupFile.Writer(header: header, key: key)
        var pending: [SecValue] = []
        // The Secret Service's collections and aliases, first: what its items' collections are named.
        if let state = try SecretServiceStorage(
            store: store, keys: keys,
            admitted: AccessRequest(.readAttributes, caller: Caller.wholeKeychain, itemClass: .genericPassword),
            scope: .all
        ).loadState() {
            pending.append(.dictionary([BackupChunk.stateKey: state]))
        }
        var pendingSize = 0
        var count = 0
        func flush(final: Bool) throws {
            var plain = BackupChunk.encode(pending)
            defer {
                SecretBytes.wipe(&plain)
                for record in pending { record.wipeDataInPlace() }
                pending.removeAll()
                pendingSize = 0
            }
            try writer.append(plain, final: final)
        }
        var last: Int64 = 0
        while true {
            let page = try store.rows(after: last, limit: backupPage)
            guard let end = page.last else { break }
            last = end.id
            for row in page {
                guard let protection = ProtectionClass(rawValue: UInt8(clamping: row.protection)) else {
                    throw SecError(SecStatus.decode, "item row \(row.id) has an unknown class")
                }
                if protection.isThisDeviceOnly { continue }
                guard keys.isAvailable(protection) else {
                    throw SecError(
                        SecStatus.interactionNotAllowed,
                        "the \(protection.displayName) items are locked: unlock the keychain before a backup")
                }
                let item = try ItemSealer.open(row, keys: keys)
                // As stored: an item sealed under an application password stays in its box (docs/BACKUP.md
                // §1), read back with the same password; opening it would need that password here.
                let secret = try ItemSealer.openStoredSecret(item)
                let record = BackupRecord(item, secret: secret).encoded
                pendingSize += ValueCodec.encodedSize(record)
                pending.append(record)
                count += 1
                if pendingSize >= BackupFile.targetChunk { try flush(final: false) }
            }
        }
        try flush(final: true)
        return (writer.bytes, count)
    }
}

extension Caller {
    /// Who a backup or a restore reads and writes as: every group, once the keychain password was given.
    /// Only `SecretServiceStorage` sees it, for the service's state, which belongs to no group.
    static let wholeKeychain = Caller(uid: 0, pid: 0, accessGroups: [], mayUseAnyGroup: true)
}
