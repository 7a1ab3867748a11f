extension Store {
    /// Whether each commit waits for the disk (`PRAGMA synchronous`: FULL, as every store opens, or
    /// NORMAL, no fsync at commit in WAL mode). Only `Benchmarks/` turns it off, to show what durability
    /// costs per insert; the keychain never does.
    public func setDurableCommits(_ durable: Bool) throws {
        try connection.execute("PRAGMA synchronous = \(durable ? "FULL" : "NORMAL")")
    }
}
