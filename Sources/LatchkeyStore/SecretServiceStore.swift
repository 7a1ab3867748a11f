// Store support for the Secret Service (docs/SECRET-SERVICE.md): the sealed service state, the rows
// still to be re-indexed after the `v2-secret-service` migration, and hash frequencies for ordering
// lookups. Like the rest of the store, it sees only sealed blobs and keyed hashes.

extension Store {
    /// Whether any row still waits for its Secret Service hashes.
    public func hasPendingIndexRows() throws -> Bool {
        try connection.withCachedStatement(SecretServiceSQL.anyPending) { try $0.step() }
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
                rows.append(StoreRow(id: statement.int64(at: 0), persistentRef: statement.blob(at: 1),
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
    static let insertHashIfMissing = "INSERT OR IGNORE INTO item_index(hash, item) VALUES (?1, ?2)"
    static let deletePending = "DELETE FROM ss_reindex WHERE item = ?1"
    static let selectState = "SELECT value FROM ss_state WHERE name = ?1"
    static let upsertState = """
        INSERT INTO ss_state(name, value) VALUES (?1, ?2)
        ON CONFLICT(name) DO UPDATE SET value = excluded.value
        """
    static let deleteState = "DELETE FROM ss_state WHERE name = ?1"
    static let countHashCapped = "SELECT count(*) FROM (SELECT 1 FROM item_index WHERE hash = ?1 LIMIT ?2)"
}
