import CSQLite

/// The encrypted item store: one SQLite database per user.
///
/// The store only ever sees sealed blobs and keyed hashes computed by the engine; it never sees
/// plaintext attributes, secrets or keys, and imports no cryptography.
///
/// Not internally synchronised: a `Store` holds one SQLite connection and its cached statements,
/// and the engine must serialise all calls (it owns the store from a single actor or queue).
/// It is `Sendable` only so that owner may move it between threads.
public final class Store: @unchecked Sendable {
    /// The database file.
    public let path: String

    let connection: Connection
    /// 0 outside `transaction`; nested calls use savepoints.
    private var transactionDepth = 0
    /// SQL text per filter shape, so a lookup does not rebuild its SQL string each time.
    private var sqlByShape: [QueryShape: String] = [:]

    /// Opens the keychain database at `path`, creating it (mode 0600) if it does not exist, unless
    /// `mustExist`: then a missing database is `.missingDatabase`, and nothing is created.
    ///
    /// The directory must already exist. An existing file is used only if it is a latchkey
    /// database whose migrations this build knows, or an empty file, and if its write-ahead log is not
    /// damaged; otherwise this throws `.corrupt`, `.notAKeychainDatabase`, `.newerSchema` or
    /// `.damagedWAL` and leaves the files untouched: the log is checked before SQLite opens anything,
    /// since SQLite would drop what a damaged log holds and overwrite it.
    public init(path: String, mustExist: Bool = false) throws {
        self.path = path
        if mustExist, !Opening.exists(path) { throw StoreError.missingDatabase(path: path) }
        try WALCheck.check(databasePath: path)
        _ = try Opening.createIfMissing(path)
        connection = try Connection(path: path)
        do {
            let verdict = try Opening.validate(connection, path: path)
            try Opening.prepare(connection, path: path, verdict: verdict)
        } catch {
            connection.close()
            throw error
        }
    }

    deinit { connection.close() }

    /// Creates an empty database file (mode 0600) at `path` for a new keychain, or returns false when
    /// one that holds nothing is there already (`holdsNothing`). Any other file at `path` is
    /// `.notAKeychainDatabase`, left untouched. The first `Store(path:)` initialises the file; creating
    /// it first lets a keychain's creator make the database before the keybag, so that a keybag never
    /// exists without its database.
    public static func createEmpty(path: String) throws -> Bool {
        if try Opening.createIfMissing(path) { return true }
        guard holdsNothing(path: path) else { throw StoreError.notAKeychainDatabase(path: path) }
        return false
    }

    /// Whether `path` is an empty regular file without a write-ahead log that holds anything: what a
    /// creation interrupted before its keybag was written leaves, or what `createEmpty` made.
    public static func holdsNothing(path: String) -> Bool {
        guard Opening.regularFileSize(path) == 0 else { return false }
        // A log beside an empty main file can hold the whole database (nothing checkpointed yet).
        return !Opening.exists(path + "-wal") || Opening.regularFileSize(path + "-wal") == 0
    }

    /// Inserts `row` and its index hashes atomically; returns the new row id.
    /// Throws `.duplicate` if (itemClass, uniqueHash) or the persistent reference already exists.
    public func insert(_ row: NewRow) throws -> Int64 {
        try transaction {
            try guarded(duplicateOnConflict: true) {
                try connection.withCachedStatement(SQL.insertItem) { statement in
                    try statement.bind(row.persistentRef, at: 1)
                    try statement.bind(row.itemClass, at: 2)
                    try statement.bind(row.protection, at: 3)
                    try statement.bind(row.synchronizable ? 1 : 0, at: 4)
                    try statement.bind(row.uniqueHash, at: 5)
                    try statement.bind(row.wrappedKey, at: 6)
                    try statement.bind(row.metadata, at: 7)
                    try statement.bind(row.secret, at: 8)
                    try statement.run()
                }
                let id = connection.lastInsertRowID
                try insertHashes(row.indexHashes, item: id)
                return id
            }
        }
    }

    /// Rows matching `filter`, ordered by id ascending.
    public func rows(matching filter: RowFilter) throws -> [StoreRow] {
        try select(.full, filter) { statement in readRow(statement) }
    }

    /// The same selection as `rows(matching:)`, without reading the sealed blobs.
    public func headers(matching filter: RowFilter) throws -> [RowHeader] {
        try select(.header, filter) { statement in
            RowHeader(
                id: statement.int64(at: 0), persistentRef: statement.blob(at: 1),
                protection: statement.int(at: 2), synchronizable: statement.int64(at: 3) != 0)
        }
    }

    /// The row with this persistent reference, whatever its class or synchronizable state.
    public func row(persistentRef: [UInt8]) throws -> StoreRow? {
        try guarded {
            try connection.withCachedStatement(SQL.selectByPersistentRef) { statement in
                try statement.bind(persistentRef, at: 1)
                return try statement.step() ? readRow(statement) : nil
            }
        }
    }

    /// Replaces the contents of row `id`, keeping its id: protection, synchronizable, unique hash,
    /// the three blobs and the full set of index hashes.
    ///
    /// `row.persistentRef` and `row.itemClass` must equal the stored ones (they identify the item
    /// and never change); if no row has this id, persistent reference and class, throws `.notFound`.
    /// Throws `.duplicate` if the new unique hash clashes with another item; the old row is then intact.
    public func replace(id: Int64, with row: NewRow) throws {
        try transaction {
            try guarded(duplicateOnConflict: true) {
                try connection.withCachedStatement(SQL.updateItem) { statement in
                    try statement.bind(row.protection, at: 1)
                    try statement.bind(row.synchronizable ? 1 : 0, at: 2)
                    try statement.bind(row.uniqueHash, at: 3)
                    try statement.bind(row.wrappedKey, at: 4)
                    try statement.bind(row.metadata, at: 5)
                    try statement.bind(row.secret, at: 6)
                    try statement.bind(id, at: 7)
                    try statement.bind(row.persistentRef, at: 8)
                    try statement.bind(row.itemClass, at: 9)
                    try statement.run()
                }
                guard connection.changes == 1 else { throw StoreError.notFound }
                try connection.withCachedStatement(SQL.deleteHashes) { statement in
                    try statement.bind(id, at: 1)
                    try statement.run()
                }
                try insertHashes(row.indexHashes, item: id)
            }
        }
    }

    /// Deletes the rows with these ids (their index hashes go by cascade); returns how many existed.
    public func delete(ids: [Int64]) throws -> Int {
        if ids.isEmpty { return 0 }
        return try transaction {
            try guarded {
                var deleted = 0
                for id in ids {
                    try connection.withCachedStatement(SQL.deleteItem) { statement in
                        try statement.bind(id, at: 1)
                        try statement.run()
                    }
                    deleted += connection.changes
                }
                return deleted
            }
        }
    }

    /// Runs `body` in one transaction: BEGIN IMMEDIATE … COMMIT, or ROLLBACK if `body` throws
    /// (the error is rethrown unchanged).
    ///
    /// IMMEDIATE takes the write lock up front, so a read-then-write body cannot fail half-way with
    /// SQLITE_BUSY. A nested call runs in a SAVEPOINT: if it throws, only its own changes are
    /// undone, and the caller may catch the error and still commit the outer transaction.
    public func transaction<T>(_ body: () throws -> T) throws -> T {
        let outermost = transactionDepth == 0
        try guarded { try connection.execute(outermost ? "BEGIN IMMEDIATE" : "SAVEPOINT latchkey") }
        transactionDepth += 1
        let result: T
        do {
            result = try body()
        } catch {
            transactionDepth -= 1
            rollback(outermost: outermost)
            throw error
        }
        transactionDepth -= 1
        do {
            try guarded { try connection.execute(outermost ? "COMMIT" : "RELEASE latchkey") }
        } catch {
            rollback(outermost: outermost)
            throw error
        }
        return result
    }

    /// Number of rows of `itemClass`, or of all rows when nil.
    public func count(itemClass: Int?) throws -> Int {
        try guarded {
            try connection.withCachedStatement(itemClass == nil ? SQL.countAll : SQL.countClass) { statement in
                if let itemClass { try statement.bind(itemClass, at: 1) }
                return try statement.step() ? statement.int(at: 0) : 0
            }
        }
    }

    /// Copies the WAL into the main file and truncates the WAL to zero bytes (for tests and
    /// shutdown). Throws SQLITE_BUSY if another connection is reading.
    ///
    /// secure_delete zeroes deleted cells in the current page images, but older WAL frames still
    /// hold the previous images until the WAL is checkpointed and restarted; this removes them.
    public func checkpoint() throws {
        try guarded {
            let db = try connection.openHandle()
            let rc = sqlite3_wal_checkpoint_v2(db, nil, SQLITE_CHECKPOINT_TRUNCATE, nil, nil)
            if rc != SQLITE_OK { throw Connection.error(db: db, code: rc, sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
        }
    }

    /// Finalizes cached statements and closes the database. Later calls throw SQLITE_MISUSE
    /// ("store is closed"). Idempotent; also done on deinit.
    public func close() {
        connection.close()
    }

    // MARK: - Internals

    /// The SQL a filter runs; internal so tests can EXPLAIN it.
    func selectSQL(
        _ columns: QueryShape.Columns, _ filter: RowFilter, hashCount: Int? = nil, anyHashCount: Int? = nil
    ) -> String {
        let shape = QueryShape(
            columns: columns, filter: filter,
            hashCount: hashCount ?? uniqued(filter.allOfHashes).count,
            anyHashCount: anyHashCount ?? filter.anyOfHashes.map { uniqued($0).count } ?? 0)
        if let sql = sqlByShape[shape] { return sql }
        let sql = shape.sql
        sqlByShape[shape] = sql
        return sql
    }

    private func select<T>(
        _ columns: QueryShape.Columns, _ filter: RowFilter,
        _ read: (Statement) -> T
    ) throws -> [T] {
        if filter.protections?.isEmpty == true { return [] }
        if let limit = filter.limit, limit <= 0 { return [] }
        if filter.anyOfHashes?.isEmpty == true { return [] }
        let hashes = uniqued(filter.allOfHashes)
        let anyOf = filter.anyOfHashes.map(uniqued) ?? []
        let sql = selectSQL(columns, filter, hashCount: hashes.count, anyHashCount: anyOf.count)
        return try guarded {
            try connection.withCachedStatement(sql) { statement in
                try bind(filter, hashes: hashes, anyOf: anyOf, to: statement)
                var result: [T] = []
                while try statement.step() { result.append(read(statement)) }
                return result
            }
        }
    }

    /// Binds in the order `QueryShape.sql` numbers its parameters.
    func bind(_ filter: RowFilter, hashes: [[UInt8]], anyOf: [[UInt8]] = [], to statement: Statement) throws {
        var index: Int32 = 1
        func next() -> Int32 {
            defer { index += 1 }
            return index
        }
        try statement.bind(filter.itemClass, at: next())
        if let sync = filter.synchronizable { try statement.bind(sync ? 1 : 0, at: next()) }
        if let persistentRef = filter.persistentRef { try statement.bind(persistentRef, at: next()) }
        for protection in filter.protections ?? [] { try statement.bind(protection, at: next()) }
        for hash in hashes { try statement.bind(hash, at: next()) }
        for hash in anyOf { try statement.bind(hash, at: next()) }
        if let limit = filter.limit { try statement.bind(limit, at: next()) }
    }

    func readRow(_ statement: Statement) -> StoreRow {
        StoreRow(
            id: statement.int64(at: 0), persistentRef: statement.blob(at: 1), itemClass: statement.int(at: 2),
            protection: statement.int(at: 3), synchronizable: statement.int64(at: 4) != 0,
            uniqueHash: statement.blob(at: 5), wrappedKey: statement.blob(at: 6),
            metadata: statement.blob(at: 7), secret: statement.blob(at: 8))
    }

    private func insertHashes(_ hashes: [[UInt8]], item: Int64) throws {
        // Deduplicated first: (hash, item) is the primary key, and a repeated attribute value is
        // not an error.
        for hash in uniqued(hashes) {
            try connection.withCachedStatement(SQL.insertHash) { statement in
                try statement.bind(hash, at: 1)
                try statement.bind(item, at: 2)
                try statement.run()
            }
        }
    }

    private func rollback(outermost: Bool) {
        if outermost {
            // SQLite may already have rolled back by itself (e.g. after SQLITE_FULL).
            if !connection.isAutocommit { try? connection.execute("ROLLBACK") }
        } else {
            try? connection.execute("ROLLBACK TO latchkey; RELEASE latchkey")
        }
    }

    /// Refines SQLite errors: corruption names the file; a UNIQUE violation becomes `.duplicate`
    /// where the caller asks for it. Other errors (including the caller's own) pass unchanged.
    func guarded<T>(duplicateOnConflict: Bool = false, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch StoreError.sqlite(let code, let message, _)
            where [SQLiteCode.corrupt, SQLiteCode.notADatabase].contains(SQLiteCode.primary(code))
        {
            throw StoreError.corrupt(path: path, reason: message)
        } catch StoreError.sqlite(let code, _, _)
            where duplicateOnConflict
            && (code == SQLiteCode.constraintUnique || code == SQLiteCode.constraintPrimaryKey)
        {
            throw StoreError.duplicate
        }
    }
}
