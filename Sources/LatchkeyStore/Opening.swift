import CSQLite

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

// Opening a keychain file. The rule: never destroy data. Everything up to `Opening.prepare` only
// reads; a file that is not SQLite, is damaged, belongs to another program, or was written by a
// newer latchkey is reported and left byte-for-byte as it was.

enum Opening {
    /// What validation decided about an openable file.
    enum Verdict {
        /// Holds no data: a file we just created, an empty file, or an SQLite file with no tables
        /// and no application_id. Initialise it.
        case initialise
        /// A latchkey database whose recorded migrations we all know.
        case keychain
    }

    /// Creates `path` with mode 0600 if it does not exist; returns whether it did.
    ///
    /// Creating the file ourselves (O_EXCL) rather than letting SQLite do it means the secret-bearing
    /// file never exists, even briefly, with the umask's wider mode; SQLite then gives the -wal and
    /// -shm files the main file's mode. O_EXCL also refuses to follow a planted symlink.
    static func createIfMissing(_ path: String) throws -> Bool {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if fd >= 0 {
            // The umask can only narrow 0600, but a narrowed mode (e.g. 0400) would make the
            // keychain unwritable; state the mode exactly.
            fchmod(fd, 0o600)
            close(fd)
            return true
        }
        let code = errno
        if code == EEXIST { return false }
        throw StoreError.sqlite(
            code: SQLITE_CANTOPEN,
            message: "\(path): cannot create: \(String(cString: strerror(code)))", sql: nil)
    }

    /// Whether anything is at `path`, a dangling symbolic link included (`lstat`).
    static func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }

    /// The size of the regular file at `path`; nil when there is none (nothing, or something else).
    static func regularFileSize(_ path: String) -> Int? {
        var info = stat()
        guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
        return Int(info.st_size)
    }

    /// Connection settings that change no file contents, so they are safe before validation.
    private static func configure(_ connection: Connection) throws {
        let db = try connection.openHandle()
        // Another process (a CLI, a second agent during restart) may hold the write lock briefly.
        sqlite3_busy_timeout(db, 5_000)
        CommitCount.install(on: db)
        // FULL: in WAL mode this fsyncs the WAL at every commit, so an add that returned success
        // survives power loss. NORMAL would only guarantee consistency, not durability.
        // secure_delete: deleted secrets are zeroed in their pages instead of lingering in free space.
        // trusted_schema=OFF: a hostile file's views/triggers cannot call application functions.
        // mmap_size: pages are read through a read-only mapping of the file (the first 256 MiB) instead
        // of being copied out of the kernel's page cache with pread into SQLite's 2 MiB cache. A random
        // lookup into a large keychain otherwise pays those copies and the cache churn they cause, which
        // made lookups slower as the keychain grew although the work per lookup stayed the same
        // (README, "Performance"). Writes still go through write(); the mapped pages are page cache,
        // counted in VmRSS as RssFile.
        try connection.execute(
            """
            PRAGMA foreign_keys = ON;
            PRAGMA synchronous = FULL;
            PRAGMA secure_delete = ON;
            PRAGMA trusted_schema = OFF;
            PRAGMA mmap_size = 268435456;
            """)
    }

    /// Read-only checks deciding whether this file may be used. Throws `.corrupt`,
    /// `.notAKeychainDatabase` or `.newerSchema` for files that must be left alone.
    static func validate(_ connection: Connection, path: String) throws -> Verdict {
        try namingPath(path) {
            // The first statement reads the schema (even a pragma such as foreign_keys does): a
            // non-SQLite file fails here with SQLITE_NOTADB, a file shorter than its header claims
            // with SQLITE_CORRUPT. Both are mapped to `.corrupt` by `namingPath`.
            try configure(connection)
            let applicationID = try connection.scalarInt("PRAGMA application_id") ?? 0
            let pageCount = try connection.scalarInt("PRAGMA page_count") ?? 0
            if pageCount == 0 { return .initialise }

            // quick_check walks every b-tree page (O(size), a few ms per 10k items); run once per
            // open, it catches truncation and torn pages before we write anything.
            let problems = try connection.texts("PRAGMA quick_check(8)")
            if problems != ["ok"] {
                throw StoreError.corrupt(path: path, reason: problems.joined(separator: "; "))
            }

            let objectCount = try connection.scalarInt("SELECT count(*) FROM sqlite_master") ?? 0
            guard applicationID == Int64(Schema.applicationID) else {
                // An SQLite file with no tables and no owner holds no data; anything else belongs
                // to someone else.
                if applicationID == 0 && objectCount == 0 { return .initialise }
                throw StoreError.notAKeychainDatabase(path: path)
            }
            guard let applied = try connection.appliedMigrations() else {
                // The id is only ever written in the same transaction as the migrations table.
                throw StoreError.corrupt(path: path, reason: "latchkey application_id but no migrations table")
            }
            let known = Set(Schema.migrations.map(\.name))
            if let unknown = applied.first(where: { !known.contains($0) }) {
                throw StoreError.newerSchema(path: path, migration: unknown)
            }
            return .keychain
        }
    }

    /// Errors while opening are about this file: corruption becomes `.corrupt(path:)`, and any other
    /// SQLite error gets the path prefixed to its message (e.g. a permission or I/O error).
    static func namingPath<T>(_ path: String, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch StoreError.sqlite(let code, let message, _)
            where [SQLiteCode.corrupt, SQLiteCode.notADatabase].contains(SQLiteCode.primary(code))
        {
            throw StoreError.corrupt(path: path, reason: message)
        } catch StoreError.sqlite(let code, let message, let sql) where !message.hasPrefix(path) {
            throw StoreError.sqlite(code: code, message: "\(path): \(message)", sql: sql)
        }
    }

    /// The first writes: WAL mode, then any pending migrations. Only reached after `validate`.
    static func prepare(_ connection: Connection, path: String, verdict: Verdict) throws {
        if verdict == .initialise {
            // An empty file someone else created may carry a wider mode; it is about to hold sealed
            // items, so give it the mode we would have created it with.
            chmod(path, 0o600)
        }
        // WAL: readers do not block the writer, and a commit is one sequential append + fsync.
        let mode = try namingPath(path) { try connection.texts("PRAGMA journal_mode = WAL") }
        guard mode == ["wal"] else {
            throw StoreError.sqlite(
                code: SQLITE_ERROR,
                message: "\(path): could not enable WAL (journal mode is \(mode.joined()))",
                sql: "PRAGMA journal_mode = WAL")
        }
        try namingPath(path) { try connection.migrate(path: path) }
    }
}
