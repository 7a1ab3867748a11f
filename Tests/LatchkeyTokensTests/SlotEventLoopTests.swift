import CP11Kit
import XCTest

@testable import LatchkeyTokens

/// The slot-event thread's loop against a fake module and a fake clock: a module that reports events in
/// a tight loop gets no more looks than one a second after a short burst, one that fails pauses between
/// tries and is given up on, and a finalised or non-waiting module ends the loop at once.
final class SlotEventLoopTests: XCTestCase {
    /// A scripted module: `answers` in order, then CKR_CRYPTOKI_NOT_INITIALIZED (finalised). Time passes
    /// only in `pause`.
    private final class Fake {
        var answers: [CK_RV]
        var time = ContinuousClock.now
        var paused: Duration = .zero
        var pauses = 0
        var events = 0
        /// The fake time of each event.
        var eventTimes: [ContinuousClock.Instant] = []
        init(_ answers: [CK_RV]) { self.answers = answers }

        func run() -> SlotEventLoop.End {
            SlotEventLoop(
                wait: { self.answers.isEmpty ? CKR_CRYPTOKI_NOT_INITIALIZED : self.answers.removeFirst() },
                event: {
                    self.events += 1
                    self.eventTimes.append(self.time)
                },
                pause: { duration in
                    self.time += duration
                    self.paused += duration
                    self.pauses += 1
                },
                now: { self.time }
            ).run()
        }
    }

    func testEventsInATightLoopAreLimitedToOneASecondAfterTheBurst() {
        let fake = Fake(Array(repeating: CKR_OK, count: 100))
        XCTAssertEqual(fake.run(), .finalized)
        XCTAssertEqual(fake.events, 100, "every event still asks for a look")
        let burst = Int(SlotEventLoop.burst)
        // The burst goes at once; each later event waits for its second.
        XCTAssertEqual(fake.eventTimes[burst - 1], fake.eventTimes[0])
        for index in burst..<100 {
            XCTAssertGreaterThanOrEqual(
                fake.eventTimes[index] - fake.eventTimes[index - 1], .milliseconds(999), "event \(index)")
        }
        XCTAssertGreaterThanOrEqual(fake.paused, .seconds(100 - burst - 1))
    }

    func testEventsSpreadOutAreNotDelayed() {
        // A module that waits a minute between events (a card put in and taken out now and then).
        var fake: Fake!
        fake = Fake([])
        var remaining = 30
        let loop = SlotEventLoop(
            wait: {
                guard remaining > 0 else { return CKR_CRYPTOKI_NOT_INITIALIZED }
                remaining -= 1
                fake.time += .seconds(60)
                return CKR_OK
            },
            event: { fake.events += 1 }, pause: { _ in fake.pauses += 1 }, now: { fake.time })
        XCTAssertEqual(loop.run(), .finalized)
        XCTAssertEqual(fake.events, 30)
        XCTAssertEqual(fake.pauses, 0)
    }

    func testRepeatedErrorsPauseAndEndTheLoop() {
        let fake = Fake(Array(repeating: CKR_DEVICE_ERROR, count: 50))
        XCTAssertEqual(fake.run(), .failed(CKR_DEVICE_ERROR))
        XCTAssertEqual(fake.events, 0)
        XCTAssertEqual(fake.pauses, SlotEventLoop.maximumErrors - 1, "a pause after each failure but the last")
        XCTAssertEqual(fake.paused, SlotEventLoop.errorPause * (SlotEventLoop.maximumErrors - 1))
        XCTAssertEqual(fake.answers.count, 50 - SlotEventLoop.maximumErrors, "no more waits once given up")
    }

    func testAnEventBetweenErrorsStartsTheCountAgain() {
        let errors = Array(repeating: CKR_DEVICE_ERROR, count: SlotEventLoop.maximumErrors - 1)
        let fake = Fake(errors + [CKR_OK] + errors + [CKR_OK])
        XCTAssertEqual(fake.run(), .finalized)
        XCTAssertEqual(fake.events, 2)
    }

    func testAModuleThatDoesNotWaitOrIsFinalisedEndsTheLoopAtOnce() {
        let unsupported = Fake([CKR_FUNCTION_NOT_SUPPORTED, CKR_OK])
        XCTAssertEqual(unsupported.run(), .failed(CKR_FUNCTION_NOT_SUPPORTED))
        XCTAssertEqual(unsupported.pauses, 0)
        XCTAssertEqual(unsupported.events, 0)
        let finalised = Fake([])
        XCTAssertEqual(finalised.run(), .finalized)
        XCTAssertEqual(finalised.pauses, 0)
    }
}
