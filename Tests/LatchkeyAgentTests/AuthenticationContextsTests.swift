import LatchkeyModel
import LatchkeySystem
import XCTest

@testable import LatchkeyAgent

/// The agent's registry of `LAContext`s (docs/ACCESS-CONTROL.md §7) with an injected clock and lock
/// count: windows, locks, owners, caps. The end-to-end behaviour is in AuthenticationContextTests.
final class AuthenticationContextsTests: XCTestCase {
    /// A clock the test moves, and a lock count it raises.
    private final class World: Sendable {
        let start = ContinuousClock.now
        let offset = Locked(Duration.zero)
        let locks = Locked(UInt64(0))
        let exited = Locked(Set<ContextOwner>())

        func contexts() -> AuthenticationContexts {
            AuthenticationContexts(
                now: { [self] in start + offset.withLock { $0 } }, lockCount: { [self] in locks.withLock { $0 } },
                isRunning: { [self] owner in !exited.withLock { $0.contains(owner) } })
        }

        func advance(_ duration: Duration) { offset.withLock { $0 += duration } }
    }

    private let me = ContextOwner(pid: 100, started: 5000)
    private let passed: Set<UserCheckKind> = [.userPresence, .devicePasscode]

    func testWindowIsTheReuseDurationCappedElseTheDefault() {
        XCTAssertEqual(AuthenticationContexts.window(reuse: .zero), .seconds(30))
        XCTAssertEqual(AuthenticationContexts.window(reuse: .milliseconds(1500)), .milliseconds(1500))
        XCTAssertEqual(AuthenticationContexts.window(reuse: .seconds(300)), .seconds(300))
        XCTAssertEqual(AuthenticationContexts.window(reuse: .seconds(301)), .seconds(300))
    }

    func testAnEvaluationServesWithinItsWindowOnly() throws {
        let world = World()
        let contexts = world.contexts()
        let handle = try contexts.make(for: me, reuse: .seconds(10))
        XCTAssertEqual(handle.count, 32)
        XCTAssertNil(try contexts.evaluation(handle, of: me), "not evaluated yet")
        contexts.record(passed, for: handle, of: me, lockCount: 0)
        world.advance(.seconds(9))
        XCTAssertEqual(try contexts.evaluation(handle, of: me), passed)
        world.advance(.seconds(1))
        XCTAssertNil(try contexts.evaluation(handle, of: me), "the window is ten seconds from the evaluation")
        // The context itself lives on: a new evaluation serves again.
        contexts.record(passed, for: handle, of: me, lockCount: 0)
        XCTAssertEqual(try contexts.evaluation(handle, of: me), passed)
    }

    func testWithoutAReuseDurationTheDefaultWindowApplies() throws {
        let world = World()
        let contexts = world.contexts()
        let handle = try contexts.make(for: me, reuse: .zero)
        contexts.record(passed, for: handle, of: me, lockCount: 0)
        world.advance(.seconds(29))
        XCTAssertEqual(try contexts.evaluation(handle, of: me), passed)
        world.advance(.seconds(1))
        XCTAssertNil(try contexts.evaluation(handle, of: me))
    }

    func testALongerReuseDurationSetLaterLengthensTheWindowUpToTheCap() throws {
        let world = World()
        let contexts = world.contexts()
        let handle = try contexts.make(for: me, reuse: .seconds(1))
        contexts.record(passed, for: handle, of: me, lockCount: 0)
        try contexts.update(handle, of: me, reuse: .seconds(1000))
        world.advance(.seconds(299))
        XCTAssertEqual(try contexts.evaluation(handle, of: me), passed)
        world.advance(.seconds(1))
        XCTAssertNil(try contexts.evaluation(handle, of: me), "never beyond 300 s")
    }

    func testALockEndsEvaluationsAlsoOneThatBeganBeforeIt() throws {
        let world = World()
        let contexts = world.contexts()
        let handle = try contexts.make(for: me, reuse: .seconds(60))
        contexts.record(passed, for: handle, of: me, lockCount: 0)
        world.locks.withLock { $0 += 1 }
        XCTAssertNil(try contexts.evaluation(handle, of: me), "the keychain was locked since")
        // A check that began before a lock (lock count 1) and was recorded after another one.
        world.locks.withLock { $0 += 1 }
        contexts.record(passed, for: handle, of: me, lockCount: 1)
        XCTAssertNil(try contexts.evaluation(handle, of: me))
        contexts.record(passed, for: handle, of: me, lockCount: 2)
        XCTAssertEqual(try contexts.evaluation(handle, of: me), passed)
    }

    func testAnotherProcessOrAnInvalidatedOrUnknownHandleIsAuthFailed() throws {
        let world = World()
        let contexts = world.contexts()
        let handle = try contexts.make(for: me, reuse: .seconds(60))
        contexts.record(passed, for: handle, of: me, lockCount: 0)
        for other in [ContextOwner(pid: 101, started: 5000), ContextOwner(pid: 100, started: 5001)] {
            XCTAssertEqual(status { _ = try contexts.evaluation(handle, of: other) }, SecStatus.authFailed)
            XCTAssertEqual(status { try contexts.update(handle, of: other, reuse: .zero) }, SecStatus.authFailed)
            contexts.record(passed, for: handle, of: other, lockCount: 0)
            contexts.invalidate(handle, of: other)
        }
        XCTAssertEqual(try contexts.evaluation(handle, of: me), passed, "others could neither use nor end it")
        contexts.invalidate(handle, of: me)
        XCTAssertEqual(status { _ = try contexts.evaluation(handle, of: me) }, SecStatus.authFailed)
        contexts.record(passed, for: handle, of: me, lockCount: 0)
        XCTAssertEqual(contexts.count, 0, "an invalidated context records nothing")
        XCTAssertEqual(
            status { _ = try contexts.evaluation([UInt8](repeating: 0, count: 32), of: me) }, SecStatus.authFailed)
    }

    func testAProcessHoldsAtMostItsShareAndLosesItsLeastRecentlyUsed() throws {
        let world = World()
        let contexts = world.contexts()
        var handles: [[UInt8]] = []
        for _ in 0..<AuthenticationContexts.maximumPerProcess {
            handles.append(try contexts.make(for: me, reuse: .zero))
            world.advance(.milliseconds(1))
        }
        _ = try contexts.evaluation(handles[0], of: me)  // used: handles[1] is now the oldest
        world.advance(.milliseconds(1))
        let newest = try contexts.make(for: me, reuse: .zero)
        XCTAssertEqual(contexts.count, AuthenticationContexts.maximumPerProcess)
        XCTAssertNil(try contexts.evaluation(handles[0], of: me))
        XCTAssertNil(try contexts.evaluation(newest, of: me))
        XCTAssertEqual(status { _ = try contexts.evaluation(handles[1], of: me) }, SecStatus.authFailed)
    }

    func testTheAgentHoldsABoundedNumberAndReclaimsThoseOfExitedProcesses() throws {
        let world = World()
        let contexts = world.contexts()
        let perProcess = AuthenticationContexts.maximumPerProcess
        let processes = AuthenticationContexts.maximumContexts / perProcess
        for pid in 0..<processes {
            for _ in 0..<perProcess {
                _ = try contexts.make(for: ContextOwner(pid: Int32(pid), started: 1), reuse: .zero)
            }
        }
        XCTAssertEqual(contexts.count, AuthenticationContexts.maximumContexts)
        XCTAssertEqual(status { _ = try contexts.make(for: me, reuse: .zero) }, SecStatus.allocate)
        world.exited.withLock { _ = $0.insert(ContextOwner(pid: 3, started: 1)) }
        XCTAssertNoThrow(try contexts.make(for: me, reuse: .zero))
        XCTAssertEqual(contexts.count, AuthenticationContexts.maximumContexts - perProcess + 1)
    }

    func testAHandleSentAndWipedInPlaceLeavesTheContext() throws {
        let contexts = World().contexts()
        let handle = try contexts.make(for: me, reuse: .zero)
        let kept = handle.withUnsafeBufferPointer { Array($0) }
        // What the server does to every data value of a response once sent.
        SecValue.data(handle).wipeDataInPlace()
        XCTAssertNil(try contexts.evaluation(kept, of: me))
    }

    func testHandlesAreRandom() throws {
        let contexts = World().contexts()
        let a = try contexts.make(for: me, reuse: .zero)
        let b = try contexts.make(for: me, reuse: .zero)
        XCTAssertNotEqual(a, b)
        XCTAssertNotEqual(a, [UInt8](repeating: a[0], count: 32))
    }

    private func status(_ body: () throws -> Void) -> Int32? {
        do {
            try body()
            return nil
        } catch let error as SecError {
            return error.status
        } catch {
            return nil
        }
    }
}
