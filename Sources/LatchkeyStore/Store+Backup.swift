/// What a backup and a restore ask of the store (docs/BACKUP.md): every row in id order, a page at a
/// time, and the row an item's uniqueness hash names.
extension Store {
    /// Up to `limit` rows with ids above `id`, in id order, of every class and synchronizable state:
    /// a backup walks the whole table by pages, so no more than a page of sealed rows is read at once.
    public func rows(after id: Int64, limit: Int) throws -> [StoreRow] {
        try guarded {
            try connection.withCachedStatement(SQL.selectPage) { statement in
                try statement.bind(id, at: 1)
                try statement.bind(limit, at: 2)
                var rows: [StoreRow] = []
                while try statement.step() { rows.append(readRow(statement)) }
                return rows
            }
        }
    }

    /// The id and persistent reference of the row of `itemClass` whose uniqueness hash is `uniqueHash`
    /// (the item a new one with that hash would duplicate), or nil.
    public func row(itemClass: Int, uniqueHash: [UInt8]) throws -> (id: Int64, persistentRef: [UInt8])? {
        try guarded {
            try connection.withCachedStatement(SQL.selectByUniqueHash) { statement in
                try statement.bind(itemClass, at: 1)
                try statement.bind(uniqueHash, at: 2)
                return try statement.step() ? (statement.int64(at: 0), statement.blob(at: 1)) : nil
            }
        }
    }
}

extension SQL {
    static let selectPage = """
        SELECT id, persistref, class, pdmn, sync, uniq, wrappedkey, metadata, secret
        FROM items WHERE id > ?1 ORDER BY id LIMIT ?2
        """
    // UNIQUE(class, uniq) makes this one probe of its index.
    static let selectByUniqueHash = "SELECT id, persistref FROM items WHERE class = ?1 AND uniq = ?2"
}
