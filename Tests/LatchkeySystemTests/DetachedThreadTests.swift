import LatchkeySystem
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

final class DetachedThreadTests: XCTestCase {
    func testRunsTheBodyOnAnotherThread() {
        let monitor = Monitor()
        let ranOn = Locked<pthread_t?>(nil)
        XCTAssertTrue(
            startDetachedThread {
                monitor.locked { ranOn.withLock { $0 = pthread_self() } }
                monitor.broadcast()
            })
        XCTAssertTrue(monitor.wait(timeout: 30) { ranOn.withLock { $0 } != nil }, "the body did not run")
        let thread = ranOn.withLock { $0 }!
        XCTAssertEqual(pthread_equal(thread, pthread_self()), 0, "the body ran on the caller's thread")
    }

    func testHonoursAStackSize() {
        let monitor = Monitor()
        let ran = Locked(false)
        XCTAssertTrue(
            startDetachedThread(stackSize: 1 << 20) {
                monitor.locked { ran.withLock { $0 = true } }
                monitor.broadcast()
            })
        XCTAssertTrue(monitor.wait(timeout: 30) { ran.withLock { $0 } })
    }

    /// A thread the system cannot create (a stack larger than the address space, or a negative one) is
    /// reported as such; the body never runs, and what it captured is released.
    func testReportsFailureWithoutRunningOrLeakingTheBody() {
        final class Capture: Sendable {}
        let ran = Locked(false)
        for stackSize in [Int(1) << 50, -1] {
            weak var released: Capture?
            do {
                let capture = Capture()
                released = capture
                XCTAssertFalse(
                    startDetachedThread(stackSize: stackSize) {
                        _ = capture
                        ran.withLock { $0 = true }
                    }, "stack size \(stackSize)")
            }
            XCTAssertNil(released, "the body of a thread that never started was not released")
        }
        // Had a thread started after all, it would have had ample time to run by now.
        usleep(100_000)
        XCTAssertFalse(ran.withLock { $0 })
    }
}
