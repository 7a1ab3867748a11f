import Foundation

/// Waiting on a condition instead of sleeping a fixed time: a wait for something to happen costs as long
/// as the thing takes, and its limit only decides when to give up.
public enum Poll {
    /// Checks `condition` every `interval` seconds until it holds or `seconds` have passed (on a
    /// monotonic clock); returns whether it held.
    public static func until(
        within seconds: Double, every interval: Double = 0.01,
        _ condition: () throws -> Bool
    ) rethrows -> Bool {
        let end = ContinuousClock.now + .seconds(seconds)
        while true {
            if try condition() { return true }
            if ContinuousClock.now >= end { return false }
            usleep(UInt32(interval * 1_000_000))
        }
    }

    /// Checks `condition` every `interval` seconds for `seconds`; returns false as soon as it fails.
    /// For a negative property ("the keys are not dropped") no event can announce: the caller chooses
    /// the shortest span that proves it and says why.
    public static func holds(
        for seconds: Double, every interval: Double = 0.01,
        _ condition: () throws -> Bool
    ) rethrows -> Bool {
        let end = ContinuousClock.now + .seconds(seconds)
        while true {
            if try !condition() { return false }
            if ContinuousClock.now >= end { return true }
            usleep(UInt32(interval * 1_000_000))
        }
    }
}
