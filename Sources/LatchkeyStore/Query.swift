// SQL for `RowFilter` selections. The number of hashes and protection classes varies, so each
// distinct combination ("shape") gets its own SQL text, and so its own cached prepared statement.
// Values are always bound, never spliced into SQL: the text depends only on the shape.

/// The shape of a filtered SELECT: everything that changes the SQL text, nothing that is bound.
struct QueryShape: Hashable {
    enum Columns: Hashable {
        /// Every column, for `StoreRow`.
        case full
        /// id, persistref, pdmn, sync, for `RowHeader` (no blobs read or copied).
        case header
    }

    var columns: Columns
    var matchesSync: Bool
    var matchesPersistentRef: Bool
    var protectionCount: Int
    var hashCount: Int
    /// How many hashes of which the row must carry one (`RowFilter.anyOfHashes`); 0: no such condition.
    var anyHashCount: Int
    var hasLimit: Bool

    init(columns: Columns, filter: RowFilter, hashCount: Int, anyHashCount: Int = 0) {
        self.columns = columns
        matchesSync = filter.synchronizable != nil
        matchesPersistentRef = filter.persistentRef != nil
        protectionCount = filter.protections?.count ?? 0
        self.hashCount = hashCount
        self.anyHashCount = anyHashCount
        hasLimit = filter.limit != nil
    }

    /// Parameters are numbered in this order, which `Store.bind(_:hashes:anyOf:to:)` follows:
    /// class, sync, persistref, protections..., hashes..., any-of hashes..., limit.
    var sql: String {
        var next: Int32 = 1
        func parameter() -> String {
            defer { next += 1 }
            return "?\(next)"
        }

        var conditions = ["i.class = \(parameter())"]
        if matchesSync { conditions.append("i.sync = \(parameter())") }
        var persistentRefCondition: String?
        if matchesPersistentRef { persistentRefCondition = "i.persistref = \(parameter())" }
        if protectionCount > 0 {
            let list = (0..<protectionCount).map { _ in parameter() }.joined(separator: ", ")
            conditions.append("i.pdmn IN (\(list))")
        }
        let hashParameters = (0..<hashCount).map { _ in parameter() }
        if anyHashCount > 0 {
            // A probe of the (hash, item) primary key per hash, for each row selected otherwise.
            let list = (0..<anyHashCount).map { _ in parameter() }.joined(separator: ", ")
            conditions.append("EXISTS (SELECT 1 FROM item_index AS g WHERE g.item = i.id AND g.hash IN (\(list)))")
        }

        // The join order is forced with CROSS JOIN (SQLite never reorders it). Without statistics
        // the planner can prefer the (class, uniq) index and scan the whole class, which makes a
        // lookup O(items). The plans below are O(rows carrying the first hash) or O(1).
        let from: String
        let order: String
        if let persistentRefCondition {
            // Unique persistref: one row at most; the hashes become primary-key probes.
            conditions.insert(persistentRefCondition, at: 0)
            from = (["items AS i"] + (0..<hashCount).map { "item_index AS h\($0)" }).joined(separator: " CROSS JOIN ")
            for (k, p) in hashParameters.enumerated() { conditions.append("h\(k).hash = \(p) AND h\(k).item = i.id") }
            order = "i.id"
        } else if hashCount > 0 {
            // Walk the (hash, item) primary key for the first hash (already sorted by item, so
            // ORDER BY needs no sort), probe the others' (hash, item) keys, and only then fetch
            // the items row by rowid.
            from = ((0..<hashCount).map { "item_index AS h\($0)" } + ["items AS i"]).joined(separator: " CROSS JOIN ")
            var joins = ["h0.hash = \(hashParameters[0])"]
            for k in 1..<hashCount { joins.append("h\(k).hash = \(hashParameters[k]) AND h\(k).item = h0.item") }
            joins.append("i.id = h0.item")
            conditions.insert(contentsOf: joins, at: 0)
            order = "h0.item"
        } else {
            from = "items AS i"
            order = "i.id"
        }

        let selected: String
        switch columns {
        case .full: selected = "i.id, i.persistref, i.class, i.pdmn, i.sync, i.uniq, i.wrappedkey, i.metadata, i.secret"
        case .header: selected = "i.id, i.persistref, i.pdmn, i.sync"
        }
        var sql = "SELECT \(selected) FROM \(from) WHERE \(conditions.joined(separator: " AND ")) ORDER BY \(order)"
        if hasLimit { sql += " LIMIT \(parameter())" }
        return sql
    }
}

/// Fixed statements, kept in one place so the statement cache is keyed by identical text.
enum SQL {
    static let insertItem = """
        INSERT INTO items(persistref, class, pdmn, sync, uniq, wrappedkey, metadata, secret)
        VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
        """
    static let insertHash = "INSERT INTO item_index(hash, item) VALUES (?1, ?2)"
    // Matching on persistref and class too: replace must never move an item to another class or
    // identity; a mismatch reads as "no such item".
    static let updateItem = """
        UPDATE items SET pdmn = ?1, sync = ?2, uniq = ?3, wrappedkey = ?4, metadata = ?5, secret = ?6
        WHERE id = ?7 AND persistref = ?8 AND class = ?9
        """
    static let deleteHashes = "DELETE FROM item_index WHERE item = ?1"
    static let deleteItem = "DELETE FROM items WHERE id = ?1"
    static let selectByPersistentRef = """
        SELECT id, persistref, class, pdmn, sync, uniq, wrappedkey, metadata, secret
        FROM items WHERE persistref = ?1
        """
    static let countAll = "SELECT count(*) FROM items"
    static let countClass = "SELECT count(*) FROM items WHERE class = ?1"
}
