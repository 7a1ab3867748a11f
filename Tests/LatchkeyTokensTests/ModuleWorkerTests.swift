import Foundation
import XCTest

@testable import LatchkeyTokens

/// A module's thread: a hung call holds up only its own module's jobs, and whoever waits gives up at
/// its deadline; the queue behind a hung call is bounded.
final class ModuleWorkerTests: XCTestCase {
    func testAHungJobEndsTheWaitAtItsDeadlineAndTheQueueIsBounded() throws {
        let worker = try XCTUnwrap(ModuleWorker(name: "test"))
        let release = DispatchSemaphore(value: 0)
        XCTAssertTrue(worker.post { release.wait() })  // a module call that does not return
        let started = Date()
        let waited: Int? = worker.run(timeout: .milliseconds(200)) { 1 }
        XCTAssertNil(waited)
        XCTAssertLessThan(Date().timeIntervalSince(started), 5)
        XCTAssertTrue(worker.isStuck(longerThan: .milliseconds(100)))
        var queued = 0
        while worker.post({}) { queued += 1 }
        XCTAssertLessThanOrEqual(queued, ModuleWorker.maximumQueued)
        let refused: Int? = worker.run(timeout: .milliseconds(10)) { 2 }
        XCTAssertNil(refused, "a full queue refuses at once")
        release.signal()
        // Once the module answers, the queue drains (a job may be refused until it has) and jobs run again.
        var answered: Int?
        for _ in 0..<100 where answered == nil {
            answered = worker.run(timeout: .seconds(10)) { 3 }
            if answered == nil { usleep(50_000) }
        }
        XCTAssertEqual(answered, 3)
    }

    /// A keychain lock's logout is never refused: a program that keeps the queue full must not keep a
    /// token logged in through the lock. It runs before the jobs already queued.
    func testALogoutIsNeverDroppedAndRunsBeforeQueuedJobs() throws {
        let worker = try XCTUnwrap(ModuleWorker(name: "test"))
        let release = DispatchSemaphore(value: 0)
        XCTAssertTrue(worker.post { release.wait() })
        let order = OrderLog()
        while worker.post({ order.append("job") }) {}
        XCTAssertTrue(worker.run(timeout: .milliseconds(10), { 0 }) == nil, "the queue is full")
        worker.logout(session: 7) { order.append("logout") }
        release.signal()
        var after: Int?
        for _ in 0..<100 where after == nil {
            after = worker.run(timeout: .seconds(10)) { 4 }
            if after == nil { usleep(50_000) }
        }
        XCTAssertEqual(after, 4)
        XCTAssertEqual(order.entries.first, "logout", "the logout ran, before the jobs queued earlier")
        XCTAssertEqual(order.entries.filter { $0 == "logout" }.count, 1)
    }
}

extension ModuleWorkerTests {
    /// A login given up at its deadline never runs late, and lets its PIN go at once.
    func testAJobGivenUpAtItsDeadlineNeverRunsAndReleasesWhatItHolds() throws {
        let worker = try XCTUnwrap(ModuleWorker(name: "test"))
        let release = DispatchSemaphore(value: 0)
        XCTAssertTrue(worker.post { release.wait() })
        let order = OrderLog()
        weak var released: OrderLog?
        do {
            let pin = OrderLog()
            released = pin
            let rv: Int? = worker.runUnlessLate(timeout: .milliseconds(100)) {
                pin.append("login")
                order.append("login")
                return 0
            }
            XCTAssertNil(rv)
        }
        XCTAssertNil(released, "the job's captures (the PIN) are gone once its caller gave up")
        release.signal()
        XCTAssertTrue(worker.post { order.append("after") })
        for _ in 0..<200 where order.entries.isEmpty { usleep(10_000) }
        XCTAssertEqual(order.entries, ["after"], "the login never ran")
    }
}

/// What ran, in order, from the worker's thread.
private final class OrderLog: @unchecked Sendable {
    private let lock = NSLock()
    private var list: [String] = []
    func append(_ entry: String) { lock.withLock { list.append(entry) } }
    var entries: [String] { lock.withLock { list } }
}
