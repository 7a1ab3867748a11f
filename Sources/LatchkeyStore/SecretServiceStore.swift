// Store support for the Secret Service (docs/SECRET-SERVICE.md): the sealed service state, the rows
// still to be re-indexed (queued by the `v2-secret-service` migration, and again whenever the engine's
// index version moves on), and hash frequencies for ordering lookups. Like the rest of the store, it sees only sealed blobs and keyed hashes.

extension Store {
    /// Whether any row still waits for its Secret Service hashes.
    public func hasPendingIndexRows() throws -> Bool {
        try connection.withCachedStatement(SecretServiceSQL.anyPending) { try $0.step() }
    }

    /// The version of the Secret Service index recorded by `queueReindex` (1 when none was: what the
    /// `v2-secret-service` migration queued), and whether any row still waits for its hashes. One
    /// statement, run before every Secret Service request.
    public func secretServiceIndexStatus() throws -> (version: Int, pending: Bool) {
        try connection.withCachedStatement(SecretServiceSQL.indexStatus) { statement in
            guard try statement.step() else { return (1, false) }
            let recorded = statement.blob(at: 0)
            let version = recorded.count == 4 ? recorded.reduce(0) { $0 << 8 | Int($1) } : 1
            return (version, statement.int(at: 1) != 0)
        }
    }

    /// Queues every row of `itemClass` for re-indexing (rows already queued stay queued once) and
    /// records `version` as the index version, atomically. The engine calls this when the hashes it
    /// derives from an item change, so that rows written before get them too.
    public func queueReindex(itemClass: Int, version: Int) throws {
        try transaction {
            try connection.withCachedStatement(SecretServiceSQL.queueClass) { statement in
                try statement.bind(itemClass, at: 1)
                try statement.run()
            }
            let bytes = (0..<4).map { UInt8(truncatingIfNeeded: version >> (8 * (3 - $0))) }
            try setStateValue(bytes, named: SecretServiceSQL.indexVersionName)
        }
    }

    /// Up to `limit` rows recorded by the `v2-secret-service` migration that have not been re-indexed,
    /// restricted to the given protection classes (the ones the engine can open), lowest ids first.
    public func pendingIndexRows(protections: [Int], limit: Int) throws -> [StoreRow] {
        guard !protections.isEmpty, limit > 0 else { return [] }
        let list = (0..<protections.count).map { "?\($0 + 2)" }.joined(separator: ", ")
        let sql = """
            SELECT i.id, i.persistref, i.class, i.pdmn, i.sync, i.uniq, i.wrappedkey, i.metadata, i.secret
            FROM ss_reindex AS r CROSS JOIN items AS i
            WHERE i.id = r.item AND i.pdmn IN (\(list)) ORDER BY r.item LIMIT ?1
            """
        return try connection.withCachedStatement(sql) { statement in
            try statement.bind(limit, at: 1)
            for (k, protection) in protections.enumerated() { try statement.bind(protection, at: Int32(k + 2)) }
            var rows: [StoreRow] = []
            while try statement.step() {
                rows.append(
                    StoreRow(
                        id: statement.int64(at: 0), persistentRef: statement.blob(at: 1),
                        itemClass: statement.int(at: 2), protection: statement.int(at: 3),
                        synchronizable: statement.int64(at: 4) != 0, uniqueHash: statement.blob(at: 5),
                        wrappedKey: statement.blob(at: 6), metadata: statement.blob(at: 7),
                        secret: statement.blob(at: 8)))
            }
            return rows
        }
    }

    /// Adds `hashes` to row `item`'s index hashes (hashes it already has are kept once) and removes
    /// the row from the re-index list, atomically.
    public func completeIndex(item: Int64, adding hashes: [[UInt8]]) throws {
        try transaction {
            for hash in uniqued(hashes) {
                try connection.withCachedStatement(SecretServiceSQL.insertHashIfMissing) { statement in
                    try statement.bind(hash, at: 1)
                    try statement.bind(item, at: 2)
                    try statement.run()
                }
            }
            try connection.withCachedStatement(SecretServiceSQL.deletePending) { statement in
                try statement.bind(item, at: 1)
                try statement.run()
            }
        }
    }

    /// When the database was made: the time its first migration was applied, in whole Unix seconds
    /// (recorded in the clear in `migrations`); nil when there is no such record. The Secret Service's
    /// `login` collection, which is the keychain, was created then.
    public func creationTime() throws -> Int64? {
        try connection.withCachedStatement(SecretServiceSQL.creationTime) { statement in
            try statement.step() ? statement.int64(at: 0) : nil
        }
    }

    /// The sealed state value stored under `name`, or nil.
    public func stateValue(named name: String) throws -> [UInt8]? {
        try connection.withCachedStatement(SecretServiceSQL.selectState) { statement in
            try statement.bind(text: name, at: 1)
            return try statement.step() ? statement.blob(at: 0) : nil
        }
    }

    /// Stores (or, with nil, removes) the sealed state value `name`. Runs inside the caller's
    /// transaction when there is one.
    public func setStateValue(_ value: [UInt8]?, named name: String) throws {
        if let value {
            try connection.withCachedStatement(SecretServiceSQL.upsertState) { statement in
                try statement.bind(text: name, at: 1)
                try statement.bind(value, at: 2)
                try statement.run()
            }
        } else {
            try connection.withCachedStatement(SecretServiceSQL.deleteState) { statement in
                try statement.bind(text: name, at: 1)
                try statement.run()
            }
        }
    }

    /// Runs `body` in one read transaction (`BEGIN DEFERRED` … `COMMIT`), so that its statements see
    /// one snapshot and take the database's file locks once, not once each. `body` must only read:
    /// `transaction` cannot run inside it. Inside a transaction already, `body` simply runs.
    public func reading<T>(_ body: () throws -> T) throws -> T {
        guard connection.isAutocommit else { return try body() }
        try connection.execute("BEGIN DEFERRED")
        let result: T
        do {
            result = try body()
        } catch {
            try? connection.execute("ROLLBACK")
            throw error
        }
        try connection.execute("COMMIT")
        return result
    }

    /// Whether row `item` carries every one of `hashes` (a primary-key probe each).
    public func carriesAll(_ hashes: [[UInt8]], item: Int64) throws -> Bool {
        for hash in hashes {
            let carried = try connection.withCachedStatement(SecretServiceSQL.carriesHash) { statement in
                try statement.bind(hash, at: 1)
                try statement.bind(item, at: 2)
                return try statement.step()
            }
            if !carried { return false }
        }
        return true
    }

    /// For each hash, how many rows carry it, counting at most `cap` (each count stops early, so this
    /// costs O(hashes × cap) whatever the store holds). Used to put the rarest hash first in a lookup.
    public func hashFrequencies(_ hashes: [[UInt8]], cap: Int) throws -> [Int] {
        try hashes.map { hash in
            try connection.withCachedStatement(SecretServiceSQL.countHashCapped) { statement in
                try statement.bind(hash, at: 1)
                try statement.bind(cap, at: 2)
                return try statement.step() ? statement.int(at: 0) : 0
            }
        }
    }
}

enum SecretServiceSQL {
    static let anyPending = "SELECT 1 FROM ss_reindex LIMIT 1"
    static let creationTime = "SELECT CAST(applied_at AS INTEGER) FROM migrations WHERE name = 'v1-items'"
    /// An `ss_state` entry that is not sealed: a version number (u32, big-endian), no secret.
    static let indexVersionName = "index-version"
    static let indexStatus = """
        SELECT coalesce((SELECT value FROM ss_state WHERE name = 'index-version'), x''),
               EXISTS (SELECT 1 FROM ss_reindex)
        """
    static let queueClass = "INSERT OR IGNORE INTO ss_reindex(item) SELECT id FROM items WHERE class = ?1"
    static let insertHashIfMissing = "INSERT OR IGNORE INTO item_index(hash, item) VALUES (?1, ?2)"
    static let deletePending = "DELETE FROM ss_reindex WHERE item = ?1"
    static let selectState = "SELECT value FROM ss_state WHERE name = ?1"
    static let upsertState = """
        INSERT INTO ss_state(name, value) VALUES (?1, ?2)
        ON CONFLICT(name) DO UPDATE SET value = excluded.value
        """
    static let deleteState = "DELETE FROM ss_state WHERE name = ?1"
    static let carriesHash = "SELECT 1 FROM item_index WHERE hash = ?1 AND item = ?2"
    static let countHashCapped = "SELECT count(*) FROM (SELECT 1 FROM item_index WHERE hash = ?1 LIMIT ?2)"
}
