import CSQLite

// A deliberately small wrapper over libsqlite3: one connection, a cache of prepared statements
// keyed by SQL text, and blob/int binding. Everything here is internal; `Store` is the API.
// Errors are thrown as `StoreError.sqlite` carrying the extended result code and the SQL text
// (never bound values, which may be sealed secrets); `Store` refines them (corrupt, duplicate).

/// Result codes we branch on. Spelled out because Swift does not import sqlite3.h's
/// expression macros such as `(SQLITE_CONSTRAINT | (8<<8))`.
enum SQLiteCode {
    static let corrupt: Int32 = 11
    static let notADatabase: Int32 = 26
    static let misuse: Int32 = 21
    static let constraintPrimaryKey: Int32 = 1555
    static let constraintUnique: Int32 = 2067

    /// The primary code of an extended result code (low byte), e.g. SQLITE_CORRUPT for SQLITE_CORRUPT_INDEX.
    static func primary(_ code: Int32) -> Int32 { code & 0xFF }
}

/// SQLITE_TRANSIENT: tells SQLite to copy bound bytes before the bind call returns, so Swift arrays
/// need not outlive the call. The copy is a few hundred bytes; not worth the unsafety of STATIC.
private var transient: sqlite3_destructor_type {
    unsafeBitCast(-1 as Int, to: sqlite3_destructor_type.self)
}

/// A prepared statement owned by a `Connection`. A value type over the handle: the connection
/// finalizes cached statements on close, `Connection.withStatement` finalizes one-off statements.
struct Statement {
    let handle: OpaquePointer
    let sql: String
    let db: OpaquePointer

    func bind(_ value: Int64, at index: Int32) throws {
        try check(sqlite3_bind_int64(handle, index, value))
    }

    func bind(_ value: Int, at index: Int32) throws {
        try bind(Int64(value), at: index)
    }

    func bind(_ bytes: [UInt8], at index: Int32) throws {
        // An empty Swift array may have no base address, and bind_blob(NULL) would store SQL NULL,
        // violating NOT NULL; a zero-length blob is what was meant.
        if bytes.isEmpty {
            try check(sqlite3_bind_zeroblob(handle, index, 0))
            return
        }
        try bytes.withUnsafeBytes { raw in
            try check(sqlite3_bind_blob(handle, index, raw.baseAddress, Int32(raw.count), transient))
        }
    }

    func bind(text: String, at index: Int32) throws {
        try check(sqlite3_bind_text(handle, index, text, -1, transient))
    }

    /// Advances the statement: true when a row is available, false when done.
    func step() throws -> Bool {
        let rc = sqlite3_step(handle)
        switch rc {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default: throw Connection.error(db: db, code: rc, sql: sql)
        }
    }

    /// Steps to completion, ignoring any rows (for INSERT/UPDATE/DELETE).
    func run() throws {
        while try step() {}
    }

    /// Resets and drops bindings. Resetting ends the statement's implicit read transaction (which
    /// would otherwise pin the WAL and block checkpoints); clearing drops SQLite's copies of bound
    /// blobs so sealed data does not sit in statement memory between calls.
    func reset() {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
    }

    func int64(at column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }

    func int(at column: Int32) -> Int { Int(sqlite3_column_int64(handle, column)) }

    func blob(at column: Int32) -> [UInt8] {
        // Call column_blob before column_bytes, as the SQLite docs prescribe.
        guard let pointer = sqlite3_column_blob(handle, column) else { return [] }
        let count = Int(sqlite3_column_bytes(handle, column))
        return [UInt8](UnsafeRawBufferPointer(start: pointer, count: count))
    }

    func text(at column: Int32) -> String? {
        guard let pointer = sqlite3_column_text(handle, column) else { return nil }
        return String(cString: pointer)
    }

    private func check(_ rc: Int32) throws {
        if rc != SQLITE_OK { throw Connection.error(db: db, code: rc, sql: sql) }
    }
}

/// One SQLite connection. Not thread-safe by itself (opened with SQLITE_OPEN_NOMUTEX): the owner
/// serialises access, exactly like `Store`.
final class Connection {
    private(set) var handle: OpaquePointer?
    private var cache: [String: Statement] = [:]

    /// Bound on cached statements. Query shapes are few (hash count × protection count × options),
    /// but a caller passing ever-larger hash lists must not grow the cache without limit.
    private let cacheLimit = 128
    /// Cached statements currently inside `withCachedStatement` (nested calls are possible).
    private var activeStatements = 0

    /// Opens `path` read-write without creating it (the store creates files itself, with mode 0600).
    init(path: String) throws {
        var db: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
        let rc = sqlite3_open_v2(path, &db, flags, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(rc))
            sqlite3_close_v2(db)
            throw StoreError.sqlite(code: rc, message: "\(path): \(message)", sql: nil)
        }
        handle = db
        sqlite3_extended_result_codes(db, 1)
    }

    deinit { close() }

    /// Finalizes every cached statement, then closes. Idempotent.
    func close() {
        for statement in cache.values { sqlite3_finalize(statement.handle) }
        cache.removeAll()
        if let handle { sqlite3_close_v2(handle) }
        handle = nil
    }

    func openHandle() throws -> OpaquePointer {
        guard let handle else {
            throw StoreError.sqlite(code: SQLiteCode.misuse, message: "store is closed", sql: nil)
        }
        return handle
    }

    /// Runs one or more SQL statements with no parameters (pragmas, migration scripts, BEGIN/COMMIT).
    func execute(_ sql: String) throws {
        let db = try openHandle()
        var messagePointer: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(db, sql, nil, nil, &messagePointer)
        if rc != SQLITE_OK {
            let message = messagePointer.map { String(cString: $0) } ?? String(cString: sqlite3_errmsg(db))
            sqlite3_free(messagePointer)
            throw StoreError.sqlite(code: sqlite3_extended_errcode(db), message: message, sql: sql)
        }
    }

    /// A cached statement for `sql`, prepared once with SQLITE_PREPARE_PERSISTENT (a hint that it
    /// lives long, so SQLite does not take it from lookaside memory). `body` runs with the statement;
    /// the statement is reset afterwards whether `body` throws or not. `body` must not run the same
    /// SQL again (one prepared statement cannot be stepped by two callers at once).
    func withCachedStatement<T>(_ sql: String, _ body: (Statement) throws -> T) throws -> T {
        if let cached = cache[sql] {
            return try run(cached, body)
        }
        if cache.count >= cacheLimit {
            // Evicting finalizes statements, so never while one may be running further up the stack;
            // a miss in that rare case just uses a one-off statement.
            guard activeStatements == 0 else { return try withStatement(sql, body) }
            for old in cache.values { sqlite3_finalize(old.handle) }
            cache.removeAll()
        }
        let statement = try prepare(sql, flags: UInt32(SQLITE_PREPARE_PERSISTENT))
        cache[sql] = statement
        return try run(statement, body)
    }

    private func run<T>(_ statement: Statement, _ body: (Statement) throws -> T) rethrows -> T {
        activeStatements += 1
        defer {
            statement.reset()
            activeStatements -= 1
        }
        return try body(statement)
    }

    /// A one-off statement, finalized when `body` returns.
    func withStatement<T>(_ sql: String, _ body: (Statement) throws -> T) throws -> T {
        let statement = try prepare(sql, flags: 0)
        defer { sqlite3_finalize(statement.handle) }
        return try body(statement)
    }

    /// First column of the first row of a parameterless query, as an integer (pragmas, counts).
    func scalarInt(_ sql: String) throws -> Int64? {
        try withStatement(sql) { statement in try statement.step() ? statement.int64(at: 0) : nil }
    }

    /// First column of every row of a parameterless query, as text.
    func texts(_ sql: String) throws -> [String] {
        try withStatement(sql) { statement in
            var result: [String] = []
            while try statement.step() { result.append(statement.text(at: 0) ?? "") }
            return result
        }
    }

    var lastInsertRowID: Int64 { handle.map { sqlite3_last_insert_rowid($0) } ?? 0 }

    /// Rows changed by the last INSERT/UPDATE/DELETE, not counting foreign-key cascades.
    var changes: Int { handle.map { Int(sqlite3_changes($0)) } ?? 0 }

    /// True outside any transaction.
    var isAutocommit: Bool { handle.map { sqlite3_get_autocommit($0) != 0 } ?? true }

    private func prepare(_ sql: String, flags: UInt32) throws -> Statement {
        let db = try openHandle()
        var statement: OpaquePointer?
        let rc = sqlite3_prepare_v3(db, sql, -1, flags, &statement, nil)
        guard rc == SQLITE_OK, let statement else {
            throw Connection.error(db: db, code: rc, sql: sql)
        }
        return Statement(handle: statement, sql: sql, db: db)
    }

    static func error(db: OpaquePointer, code: Int32, sql: String?) -> StoreError {
        // Step and prepare already return extended codes (SQLITE_OPEN_EXRESCODE); a plain code from
        // elsewhere is upgraded from errcode when that describes the same failure.
        let extended = sqlite3_extended_errcode(db)
        let best = SQLiteCode.primary(extended) == SQLiteCode.primary(code) ? extended : code
        return .sqlite(code: best, message: String(cString: sqlite3_errmsg(db)), sql: sql)
    }
}
