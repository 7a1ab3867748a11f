/// Errors thrown by `Store`.
///
/// Errors about a database file name its path, so a user reading a log can find the file.
/// They never contain bound values: the store only handles sealed blobs and keyed hashes, but those
/// still have no business in logs.
public enum StoreError: Error, Equatable, CustomStringConvertible {
    /// An insert or replace collided with an existing row: same (item class, unique hash), or the
    /// same persistent reference.
    case duplicate
    /// The file exists but is not a readable SQLite database (not SQLite at all, truncated, or
    /// failing `PRAGMA quick_check`). The store never overwrites, deletes or "repairs" such a file.
    case corrupt(path: String, reason: String)
    /// The file is a valid SQLite database that belongs to something else (its application_id is
    /// not latchkey's and it already has tables). Left untouched.
    case notAKeychainDatabase(path: String)
    /// The database's write-ahead log (`path`, the database's path with `-wal`) is damaged: SQLite would
    /// drop the committed changes it holds and overwrite it at the next write (docs/STORE.md, "The
    /// write-ahead log"). Neither file is opened or changed.
    case damagedWAL(path: String, reason: String)
    /// The database does not exist although the caller said it must (its keybag does): it is not
    /// created again.
    case missingDatabase(path: String)
    /// The database records a migration this build does not know: it was written by a newer
    /// latchkey. Left untouched, so the newer version keeps working.
    case newerSchema(path: String, migration: String)
    /// Any other SQLite failure: the extended result code, SQLite's message, and the SQL text
    /// that failed (never its bound values).
    case sqlite(code: Int32, message: String, sql: String?)
    /// `replace(id:with:)` found no row with that id, persistent reference and item class.
    case notFound

    /// A one-line, log-safe description.
    public var description: String {
        switch self {
        case .duplicate:
            return "duplicate item"
        case .corrupt(let path, let reason):
            return "keychain database \(path) is unreadable or corrupt (\(reason)); it was left untouched"
        case .notAKeychainDatabase(let path):
            return "\(path) is an SQLite database that does not belong to latchkey; it was left untouched"
        case .damagedWAL(let path, let reason):
            return
                "write-ahead log \(path) is damaged (\(reason)); it holds changes that are not in the database yet, "
                + "so the keychain was not opened and neither file was changed (restore it from a backup, or move "
                + "it away to open the database without those changes)"
        case .missingDatabase(let path):
            return "keychain database \(path) is missing; it was not created again"
        case .newerSchema(let path, let migration):
            return
                "keychain database \(path) was written by a newer latchkey (unknown migration \"\(migration)\"); it was left untouched"
        case .sqlite(let code, let message, let sql):
            let statement = sql.map { " in `\($0)`" } ?? ""
            return "SQLite error \(code): \(message)\(statement)"
        case .notFound:
            return "item not found"
        }
    }
}
