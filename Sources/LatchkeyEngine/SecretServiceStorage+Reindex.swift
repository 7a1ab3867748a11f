import LatchkeyModel
import LatchkeyStore

/// Keeping the Secret Service hashes of every generic password current (docs/SECRET-SERVICE.md §2):
/// rows written before they existed, or before the current `SecretServiceMapping.indexVersion`, get
/// them before the next Secret Service request is served.
extension SecretServiceStorage {
    /// Whether `reindexPending` has anything to do now.
    func needsReindexing() throws -> Bool {
        let status = try store.secretServiceIndexStatus()
        return status.version < SecretServiceMapping.indexVersion || (status.pending && keys.indexKey != nil)
    }

    /// Adds the Secret Service hashes of rows written before they existed, for every class whose key
    /// is held; rows written before the current `SecretServiceMapping.indexVersion` are queued for it
    /// first. A row that fails authentication is left without them (its reads report errSecDecode) and
    /// not retried.
    func reindexPending() throws {
        var status = try store.secretServiceIndexStatus()
        if status.version < SecretServiceMapping.indexVersion {
            try store.queueReindex(
                itemClass: Int(ItemClass.genericPassword.rawValue),
                version: SecretServiceMapping.indexVersion)
            status.pending = try store.hasPendingIndexRows()
        }
        guard let indexKey = keys.indexKey, status.pending else { return }
        let held = ProtectionClass.allCases.filter { keys.isAvailable($0) }.map { Int($0.rawValue) }
        while true {
            let rows = try store.pendingIndexRows(protections: held, limit: 256)
            if rows.isEmpty { return }
            // One transaction (one fsync) per batch, not per row.
            try store.transaction {
                for row in rows {
                    var hashes: [[UInt8]] = []
                    if let item = try? ItemSealer.open(row, keys: keys) {
                        hashes = try SecretServiceMapping.indexHashes(
                            attributes: item.attributes,
                            sealed: item.secretService, indexKey: indexKey)
                    }
                    try store.completeIndex(item: row.id, adding: hashes)
                }
            }
        }
    }
}
