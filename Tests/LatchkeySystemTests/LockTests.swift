import LatchkeySystem
import XCTest

/// The package's two locks under contention: `Locked` (state inside the lock) and `Monitor` (a mutex with a
/// condition), and the monitor's waits.
final class LockTests: XCTestCase {
    private static let threads = 16
    private static let incrementsPerThread = 20_000

    /// Starts `count` threads running `body(index)` and waits until all have returned.
    private func runConcurrently(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
        let finished = Monitor()
        let done = Locked(0)
        for index in 0..<count {
            XCTAssertTrue(
                startDetachedThread {
                    body(index)
                    finished.locked { done.withLock { $0 += 1 } }
                    finished.broadcast()
                })
        }
        XCTAssertTrue(finished.wait(timeout: 60) { done.withLock { $0 } == count }, "threads did not finish")
    }

    func testLockedCountsEveryIncrementUnderContention() {
        let counter = Locked(0)
        runConcurrently(Self.threads) { _ in
            for _ in 0..<Self.incrementsPerThread { counter.withLock { $0 += 1 } }
        }
        XCTAssertEqual(counter.withLock { $0 }, Self.threads * Self.incrementsPerThread)
    }

    func testLockedWithoutAValueExcludesAndRethrows() {
        struct Refused: Error, Equatable {}
        final class Shared: @unchecked Sendable {
            let lock = Locked()
            var value = 0  // guarded by lock
            var inside = 0  // guarded
            var maximumInside = 0  // guarded
        }
        let shared = Shared()
        runConcurrently(Self.threads) { _ in
            for _ in 0..<Self.incrementsPerThread / 10 {
                shared.lock.withLock {
                    shared.inside += 1
                    shared.maximumInside = max(shared.maximumInside, shared.inside)
                    shared.value += 1
                    shared.inside -= 1
                }
            }
        }
        shared.lock.withLock {
            XCTAssertEqual(shared.value, Self.threads * Self.incrementsPerThread / 10)
            XCTAssertEqual(shared.maximumInside, 1)
        }
        XCTAssertThrowsError(try shared.lock.withLock { () throws(Refused) in throw Refused() }) {
            XCTAssertEqual($0 as? Refused, Refused())
        }
        XCTAssertEqual(shared.lock.withLock { 7 }, 7)  // the throw unlocked it
        let values = Locked([1, 2])
        XCTAssertThrowsError(
            try values.withLock { (list: inout [Int]) throws(Refused) in
                list.append(3)
                throw Refused()
            })
        XCTAssertEqual(values.withLock { $0 }, [1, 2, 3], "a change made before the throw stays")
    }

    func testMonitorCountsEveryIncrementUnderContention() {
        final class Shared: @unchecked Sendable {
            let monitor = Monitor()
            var value = 0  // guarded by monitor
            var maximumInside = 0  // guarded: threads seen inside the lock at once
            var inside = 0  // guarded
        }
        let shared = Shared()
        runConcurrently(Self.threads) { _ in
            for _ in 0..<Self.incrementsPerThread {
                shared.monitor.locked {
                    shared.inside += 1
                    shared.maximumInside = max(shared.maximumInside, shared.inside)
                    shared.value += 1
                    shared.inside -= 1
                }
            }
        }
        shared.monitor.locked {
            XCTAssertEqual(shared.value, Self.threads * Self.incrementsPerThread)
            XCTAssertEqual(shared.maximumInside, 1)
        }
    }

    /// A timeout too long for a timespec (an idle lock of `inf` minutes, say) waits like nil, until the
    /// condition holds, instead of trapping on the conversion.
    func testMonitorTreatsAnEndlessTimeoutAsWaitingForever() {
        for timeout in [Double.infinity, 1e300, Monitor.longestTimeout] {
            let monitor = Monitor()
            let flag = Locked(false)
            XCTAssertTrue(
                startDetachedThread {
                    usleep(50_000)
                    flag.withLock { $0 = true }
                    monitor.broadcast()
                })
            XCTAssertTrue(monitor.wait(timeout: timeout) { flag.withLock { $0 } }, "timeout \(timeout)")
        }
    }

    func testMonitorRethrowsTypedErrorsAndReleasesTheLock() {
        struct Refused: Error, Equatable {}
        let monitor = Monitor()
        XCTAssertThrowsError(try monitor.locked { () throws(Refused) in throw Refused() }) {
            XCTAssertEqual($0 as? Refused, Refused())
        }
        // Still usable: the throw unlocked it.
        XCTAssertEqual(monitor.locked { 7 }, 7)
    }

    func testWaitTimesOutWhenNothingChanges() {
        let monitor = Monitor()
        let start = ContinuousClock.now
        XCTAssertFalse(monitor.wait(timeout: 0.2) { false })
        let waited = ContinuousClock.now - start
        XCTAssertGreaterThanOrEqual(waited, .milliseconds(190))
        XCTAssertLessThan(waited, .seconds(10))
        XCTAssertFalse(monitor.wait(timeout: .milliseconds(50)) { false })
        // A negative timeout is an immediate check, never a spin.
        XCTAssertFalse(monitor.wait(timeout: -1) { false })
        XCTAssertTrue(monitor.wait(timeout: 0) { true })
    }

    func testBroadcastWakesEveryWaiter() {
        final class Shared: @unchecked Sendable {
            let monitor = Monitor()
            var open = false  // guarded
            var woken = 0  // guarded
            var waiting = 0  // guarded
        }
        let shared = Shared()
        let waiters = 4
        for _ in 0..<waiters {
            XCTAssertTrue(
                startDetachedThread {
                    shared.monitor.locked { shared.waiting += 1 }
                    shared.monitor.broadcast()
                    let opened = shared.monitor.wait(timeout: 60) { shared.open }
                    shared.monitor.locked { if opened { shared.woken += 1 } }
                    shared.monitor.broadcast()
                })
        }
        XCTAssertTrue(shared.monitor.wait(timeout: 30) { shared.waiting == waiters })
        let start = ContinuousClock.now
        shared.monitor.locked { shared.open = true }
        shared.monitor.broadcast()
        XCTAssertTrue(shared.monitor.wait(timeout: 30) { shared.woken == waiters }, "not every waiter woke")
        // Woken by the broadcast, not by their 60 s timeout.
        XCTAssertLessThan(ContinuousClock.now - start, .seconds(20))
    }

    func testSignalWakesAWaiter() {
        final class Shared: @unchecked Sendable {
            let monitor = Monitor()
            var waiting = false  // guarded
            var ready = false  // guarded
            var woke = false  // guarded
        }
        let shared = Shared()
        XCTAssertTrue(
            startDetachedThread {
                shared.monitor.locked { shared.waiting = true }
                shared.monitor.broadcast()
                let result = shared.monitor.wait(timeout: 60) { shared.ready }
                shared.monitor.locked { shared.woke = result }
            })
        XCTAssertTrue(shared.monitor.wait(timeout: 30) { shared.waiting })
        let start = ContinuousClock.now
        shared.monitor.locked { shared.ready = true }
        shared.monitor.signal()
        // Nothing else wakes this thread: the waiter does not broadcast, so poll for its result.
        while !shared.monitor.locked({ shared.woke }) && ContinuousClock.now - start < .seconds(30) { usleep(1_000) }
        XCTAssertTrue(shared.monitor.locked { shared.woke })
        XCTAssertLessThan(ContinuousClock.now - start, .seconds(20), "woken by the timeout, not the signal")
    }
}
