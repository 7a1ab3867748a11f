import CSQLite

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A named schema change. Names are recorded in the `migrations` table when applied.
struct Migration {
    let name: String
    let sql: String
}

enum Schema {
    /// "LKCH", stored in the SQLite header so a keychain file is recognisable (`file(1)` and
    /// `PRAGMA application_id` show it) and a foreign database is never mistaken for ours.
    static let applicationID: Int32 = 0x4C4B_4348

    /// Append-only. Never edit, reorder or remove an entry once released: databases in the field
    /// record these names, and an unknown name means "written by a newer latchkey" (we refuse to
    /// touch it). Schema changes go in a new, newly named entry.
    static let migrations: [Migration] = [
        Migration(
            name: "v1-items",
            sql: """
                CREATE TABLE items(
                  id INTEGER PRIMARY KEY AUTOINCREMENT,
                  persistref BLOB NOT NULL UNIQUE,
                  class INTEGER NOT NULL,
                  pdmn INTEGER NOT NULL,
                  sync INTEGER NOT NULL DEFAULT 0 CHECK(sync IN (0,1)),
                  uniq BLOB NOT NULL,
                  wrappedkey BLOB NOT NULL,
                  metadata BLOB NOT NULL,
                  secret BLOB NOT NULL,
                  UNIQUE(class, uniq));
                CREATE TABLE item_index(
                  hash BLOB NOT NULL,
                  item INTEGER NOT NULL REFERENCES items(id) ON DELETE CASCADE,
                  PRIMARY KEY(hash, item)) WITHOUT ROWID;
                CREATE INDEX item_index_by_item ON item_index(item);
                """),
        // Secret Service (docs/SECRET-SERVICE.md): sealed service state (collections, aliases), and the
        // genp rows written before Secret Service hashes existed, which the engine re-indexes once
        // their class keys are held. Class 1 is genp.
        Migration(
            name: "v2-secret-service",
            sql: """
                CREATE TABLE ss_state(
                  name TEXT PRIMARY KEY,
                  value BLOB NOT NULL) WITHOUT ROWID;
                CREATE TABLE ss_reindex(
                  item INTEGER PRIMARY KEY REFERENCES items(id) ON DELETE CASCADE);
                INSERT INTO ss_reindex(item) SELECT id FROM items WHERE class = 1;
                """),
    ]

    /// The bookkeeping table. Created inside the first migration's transaction, so a database
    /// either has it together with v1 or has nothing of ours at all.
    static let migrationsTable =
        "CREATE TABLE IF NOT EXISTS migrations(name TEXT PRIMARY KEY, applied_at REAL NOT NULL)"
}

extension Connection {
    /// Names recorded in `migrations`, or nil when the table does not exist.
    func appliedMigrations() throws -> [String]? {
        let exists = try scalarInt("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'migrations'")
        guard exists == 1 else { return nil }
        return try texts("SELECT name FROM migrations ORDER BY applied_at, name")
    }

    /// Applies every migration not yet recorded, each in its own IMMEDIATE transaction together
    /// with its `migrations` row, so a crash leaves either the whole step or none of it.
    /// The applied set is re-read inside each transaction: another process opening the same new
    /// file at the same moment then simply finds the work done.
    func migrate(path: String) throws {
        for migration in Schema.migrations {
            try execute("BEGIN IMMEDIATE")
            do {
                let applied = try appliedMigrations() ?? []
                if let unknown = applied.first(where: { name in !Schema.migrations.contains { $0.name == name } }) {
                    throw StoreError.newerSchema(path: path, migration: unknown)
                }
                if !applied.contains(migration.name) {
                    try execute(Schema.migrationsTable)
                    // Inside the transaction: the header field is journaled like any page-1 change.
                    try execute("PRAGMA application_id = \(Schema.applicationID)")
                    try execute(migration.sql)
                    try withStatement("INSERT INTO migrations(name, applied_at) VALUES (?1, ?2)") { statement in
                        try statement.bind(text: migration.name, at: 1)
                        try statement.bindReal(currentTime(), at: 2)
                        try statement.run()
                    }
                }
                try execute("COMMIT")
            } catch {
                if !isAutocommit { try? execute("ROLLBACK") }
                throw error
            }
        }
    }

    private func currentTime() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }
}

extension Statement {
    func bindReal(_ value: Double, at index: Int32) throws {
        let rc = sqlite3_bind_double(handle, index, value)
        if rc != SQLITE_OK { throw Connection.error(db: db, code: rc, sql: sql) }
    }
}
