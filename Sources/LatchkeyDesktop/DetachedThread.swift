import LatchkeySystem

/// LatchkeySystem's `startDetachedThread`, for code that imports only this module (the agent's
/// `LockPolicy`, which takes its events from here). New code imports LatchkeySystem instead; once nothing
/// relies on this, remove it, since a file importing both modules finds two candidates.
public func startDetachedThread(_ body: @escaping @Sendable () -> Void) -> Bool {
    LatchkeySystem.startDetachedThread(body)
}
