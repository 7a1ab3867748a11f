import LatchkeyCrypto
import LatchkeyModel
import LatchkeySecrets
import LatchkeyStore

/// An item of a backup that is already in the keychain (Apple's uniqueness: the class's primary key).
package struct RestoreDuplicate: Sendable, Equatable {
    /// Its position in the backup, counted from 0: how a restore's decisions name it.
    package var index: Int
    /// Its class (`kSecClass`).
    package var itemClass: String
    /// What the user recognises it by: its label, service or server, and account, as they are.
    package var summary: String
}

/// What a restore does with the items already in the keychain.
package struct RestoreDecisions: Sendable, Equatable {
    /// What a duplicate named in neither list becomes: nil refuses the restore (errSecDuplicateItem).
    package enum Choice: Sendable, Equatable {
        case replace
        case skip
    }

    package var otherwise: Choice?
    package var replace: Set<Int> = []
    package var skip: Set<Int> = []

    package init(otherwise: Choice?, replace: Set<Int> = [], skip: Set<Int> = []) {
        self.otherwise = otherwise
        self.replace = replace
        self.skip = skip
    }

    func choice(for index: Int) -> Choice? {
        replace.contains(index) ? .replace : skip.contains(index) ? .skip : otherwise
    }
}

/// What a restore found or did.
package struct RestoreOutcome: Sendable, Equatable {
    /// Items in the backup.
    package var items = 0
    /// Items that are already in the keychain (all of them when the restore only looked).
    package var duplicates: [RestoreDuplicate] = []
    package var added = 0
    package var replaced = 0
    package var skipped = 0
}

extension Keychain {
    /// Opens a backup with `key` and, with `decisions`, merges its items into this keychain in one
    /// transaction (docs/BACKUP.md §6); without, only says what a restore would find.
    ///
    /// Every chunk is authenticated and every record checked before anything is written, so a wrong
    /// key, a damaged, truncated or newer file changes nothing (errSecAuthFailed for the key, errSecDecode
    /// for the rest). A duplicate no decision covers refuses the whole restore (errSecDuplicateItem),
    /// as does anything that fails while writing: the transaction is rolled back. `password` must be
    /// the keychain password: a restore writes into every access group.
    ///
    /// `mergeState` joins the Secret Service's collections and aliases of the backup to this keychain's
    /// (nil: the stored state, if any; the backup's; returns nil when the backup's is malformed). It is
    /// the Secret Service's to define; without it the backup's collections are not restored.
    package func restore(
        _ file: [UInt8], key: SecretBytes, password: SecretBytes, decisions: RestoreDecisions?,
        mergeState: ((SecValue?, SecValue) -> SecValue?)? = nil
    ) throws(SecError) -> RestoreOutcome {
        try lockState.verify(password: password)
        var (records, state) = try Self.readBackup(file, key: key)
        defer { for i in records.indices { records[i].wipe() } }
        return try lockState.withStore { (store, keys) throws(SecError) -> RestoreOutcome in
            do {
                var merged: SecValue?
                let storage = SecretServiceStorage(
                    store: store, keys: keys,
                    admitted: AccessRequest(.add, caller: Caller.wholeKeychain, itemClass: .genericPassword),
                    scope: .all)
                if let state, let mergeState {
                    // Computed before anything is written: a malformed state refuses the restore.
                    guard let joined = mergeState(try storage.loadState(), state) else {
                        throw BackupRecord.malformed("the Secret Service collections are malformed")
                    }
                    merged = joined
                }
                return try Self.merge(
                    records, store: store, keys: keys, decisions: decisions, state: merged, storage: storage
                ) {
                    change in itemChangeObserver?(change)
                }
            } catch {
                throw EngineErrors.map(error)
            }
        }
    }

    /// What `restore` reads of a backup before it writes anything: how many items, and whether it holds
    /// the Secret Service's state; the refusal otherwise (errSecAuthFailed for the key, errSecDecode for
    /// the rest). The fuzz target of the backup reader (fuzz/latchkey-fuzz, `backups`) drives it.
    package static func inspectBackup(_ file: [UInt8], key: SecretBytes) throws(SecError) -> (items: Int, state: Bool) {
        var (records, state) = try readBackup(file, key: key)
        defer { for i in records.indices { records[i].wipe() } }
        return (records.count, state != nil)
    }

    /// Every record of the file, or the reason it is refused.
    static func readBackup(_ file: [UInt8], key: SecretBytes) throws(SecError) -> ([BackupRecord], SecValue?) {
        var records: [BackupRecord] = []
        var state: SecValue?
        do {
            try BackupFile.open(file, key: key) { plain, index in
                let (found, chunkState) = try BackupChunk.decode(plain, first: index == 0)
                records += found
                state = chunkState ?? state
            }
        } catch let error as BackupFileError {
            for i in records.indices { records[i].wipe() }
            throw SecError(error == .wrongPassphrase ? SecStatus.authFailed : SecStatus.decode, error.message)
        } catch let error as SecError {
            for i in records.indices { records[i].wipe() }
            throw error
        } catch {
            for i in records.indices { records[i].wipe() }
            throw SecError(SecStatus.internalComponent, "the backup could not be opened: \(error)")
        }
        return (records, state)
    }

    private static func merge(
        _ records: [BackupRecord], store: Store, keys: KeyState, decisions: RestoreDecisions?, state: SecValue?,
        storage: SecretServiceStorage, notify: (KeychainItemChange) -> Void
    ) throws -> RestoreOutcome {
        let indexKey = try keys.requireIndexKey()
        for protection in Set(records.map(\.protection)) where !keys.isAvailable(protection) {
            throw SecError(
                SecStatus.interactionNotAllowed,
                "the \(protection.displayName) items are locked: unlock the keychain before a restore")
        }
        // Where each record's item already is, by Apple's uniqueness (the hash the store keeps unique).
        var existing: [(id: Int64, persistentRef: [UInt8])?] = []
        var outcome = RestoreOutcome(items: records.count)
        for (index, record) in records.enumerated() {
            let hash = try ItemSealer.uniqueHash(
                itemClass: record.itemClass, attributes: record.attributes, indexKey: indexKey,
                discriminator: SecretServiceMapping.discriminator(record.secretService))
            let found = try store.row(itemClass: Int(record.itemClass.rawValue), uniqueHash: hash)
            existing.append(found)
            if found != nil {
                outcome.duplicates.append(
                    RestoreDuplicate(index: index, itemClass: record.itemClass.name, summary: summary(of: record)))
            }
        }
        guard let decisions else { return outcome }
        var changes: [KeychainItemChange] = []
        try store.transaction {
            if let state { try storage.saveState(state) }
            for (index, record) in records.enumerated() {
                var ref = try SecureRandom.bytes(16)
                if let found = existing[index] {
                    switch decisions.choice(for: index) {
                    case nil:
                        throw SecError(
                            SecStatus.duplicateItem,
                            "item \(index) of the backup (\(summary(of: record))) is already in the keychain; "
                                + "nothing was restored")
                    case .skip?:
                        outcome.skipped += 1
                        continue
                    case .replace?:
                        ref = found.persistentRef
                    }
                }
                let row = try ItemSealer.seal(
                    ref: ref, itemClass: record.itemClass, protection: record.protection,
                    synchronizable: record.synchronizable, attributes: record.attributes, secret: record.secret,
                    classKey: try keys.key(for: record.protection), indexKey: indexKey,
                    secretService: record.secretService)
                if let found = existing[index] {
                    try store.replace(id: found.id, with: row)
                    if record.itemClass == .key { keys.privateKeys.remove(ref: ref) }
                    outcome.replaced += 1
                    changes.append(.changed(ref))
                } else {
                    do {
                        _ = try store.insert(row)
                    } catch StoreError.duplicate {
                        throw SecError(SecStatus.decode, "the backup is damaged: it holds item \(index) twice")
                    }
                    outcome.added += 1
                    changes.append(.added(ref))
                }
                if record.itemClass != .genericPassword { changes.removeLast() }
            }
        }
        for change in changes { notify(change) }
        return outcome
    }

    /// Label, service or server, account: what `latchkey restore` shows of a duplicate.
    static func summary(of record: BackupRecord) -> String {
        var parts: [String] = []
        for name in [SecAttr.label, SecAttr.service, SecAttr.server, SecAttr.account] {
            guard let value = record.attributes[name] else { continue }
            switch value {
            case .string(let s) where !s.isEmpty: parts.append("\(name)=\(s.prefix(80))")
            case .data(let d) where !d.isEmpty:
                parts.append(
                    "\(name)="
                        + (String(validating: d, as: UTF8.self).map { String($0.prefix(80)) } ?? "<\(d.count) bytes>"))
            default: continue
            }
        }
        // Shown on a terminal: no control or format character of a label (an escape sequence, a
        // right-to-left override) may reach it.
        let text = parts.isEmpty ? "no label" : parts.joined(separator: " ")
        return String(
            String.UnicodeScalarView(
                text.unicodeScalars.filter {
                    $0.properties.generalCategory != .control && $0.properties.generalCategory != .format
                }))
    }
}
