import LatchkeyAgent
import XCTest

/// Every sequence of three events from the whole alphabet, at gaps that land before, on and after the
/// grace period and the idle limit, driven as the agent's timer thread drives the schedule (wake at
/// each deadline before the next event). The resulting trace is checked against the rules stated on
/// their own terms, not against a second copy of the state machine.
final class LockScheduleTraceTests: XCTestCase {
    private static let grace = 5.0
    private static let idle = 12.0
    private static let start = 1_000.0

    private static let events: [LockSchedule.Event] = [
        .screenLocked(source: "a"), .screenLocked(source: "b"), .screenUnlocked(source: "u"),
        .preparingForSleep, .resumed, .authenticated, .itemUse,
    ]
    /// Same instant, within the grace period, exactly the grace period (an event at the instant a lock
    /// is due), and past the idle limit.
    private static let gaps: [Double] = [0, 3, 5, 13]

    enum Entry: Equatable {
        case event(Double, LockSchedule.Event, LockSchedule.Action?)
        case fired(Double, LockSchedule.Action)
    }

    /// Feeds `steps` (gap before each event) and then runs the clock on for `tail` seconds, waking at
    /// every deadline like `LockPolicy.timerLoop`.
    private static func trace(
        _ settings: LockSchedule.Settings, _ steps: [(gap: Double, event: LockSchedule.Event)],
        tail: Double
    ) -> (entries: [Entry], end: Double)? {
        var schedule = LockSchedule(settings: settings, now: start)
        var entries: [Entry] = []
        var now = start
        func runUntil(_ time: Double) -> Bool {
            while let deadline = schedule.deadline, deadline <= time {
                guard deadline >= now else { return false }  // a deadline in the past was left unfired
                now = deadline
                let due = schedule.advance(to: deadline)
                if due.isEmpty { return false }  // woken for nothing: the deadline was wrong
                entries += due.map { .fired(deadline, $0) }
                // Whatever was due has fired: the next deadline lies ahead (or the timer would spin).
                if let next = schedule.deadline, next <= deadline { return false }
            }
            return true
        }
        for (gap, event) in steps {
            let time = now + gap
            guard runUntil(time) else { return nil }
            now = time
            entries.append(.event(now, event, schedule.handle(event, now: now)))
        }
        let end = now + tail
        guard runUntil(end) else { return nil }
        return (entries, end)
    }

    func testEveryThreeEventSequenceWithGraceAndIdleLimit() {
        checkAllSequences(LockSchedule.Settings(grace: Self.grace, idleLimit: Self.idle))
    }

    func testEveryThreeEventSequenceWithoutIdleLimit() {
        checkAllSequences(LockSchedule.Settings(grace: Self.grace, idleLimit: nil))
    }

    func testEveryThreeEventSequenceWithoutGracePeriod() {
        checkAllSequences(LockSchedule.Settings(grace: 0, idleLimit: Self.idle))
    }

    private func checkAllSequences(_ settings: LockSchedule.Settings) {
        let choices = Self.events.count * Self.gaps.count
        var failures = 0
        for code in 0..<(choices * choices * choices) {
            var rest = code
            var steps: [(gap: Double, event: LockSchedule.Event)] = []
            for _ in 0..<3 {
                steps.append(
                    (Self.gaps[rest % Self.gaps.count], Self.events[(rest / Self.gaps.count) % Self.events.count]))
                rest /= choices
            }
            guard let (entries, end) = Self.trace(settings, steps, tail: 2 * Self.idle) else {
                XCTFail("a deadline was wrong (early, left behind, or not moved on by firing): \(steps)")
                failures += 1
                continue
            }
            if let problem = Self.violation(in: entries, end: end, settings) {
                XCTFail("\(problem)\nsteps: \(steps)\ntrace: \(entries)")
                failures += 1
            }
            if failures >= 5 { return }
        }
    }

    /// The first rule `entries` breaks, or nil.
    private static func violation(in entries: [Entry], end: Double, _ settings: LockSchedule.Settings) -> String? {
        /// The screen lock still waiting at index `i`: the first lock report since the last thing that
        /// ends a grace period (an unlock, authentication, sleep, or the screen lock firing).
        func pendingReport(before i: Int) -> (time: Double, source: String)? {
            var pending: (Double, String)?
            for entry in entries[..<i] {
                switch entry {
                case .event(let t, .screenLocked(let source), _) where settings.grace > 0:
                    if pending == nil { pending = (t, source) }
                case .event(_, .screenUnlocked, _), .event(_, .authenticated, _), .event(_, .preparingForSleep, _):
                    pending = nil
                case .fired(_, .lock(let reason)) where reason.hasPrefix("screen locked"):
                    pending = nil
                default:
                    break
                }
            }
            return pending
        }
        var lastUse = start  // the last request or idle lock
        for (i, entry) in entries.enumerated() {
            switch entry {
            case .event(let t, let event, let action):
                let pending = pendingReport(before: i)
                let expected: LockSchedule.Action?
                switch event {
                case .screenLocked(let source):
                    expected = settings.grace > 0 ? nil : .lock(reason: "screen locked (\(source))")
                case .preparingForSleep: expected = .lock(reason: "the machine is going to sleep")
                case .screenUnlocked(let source):
                    expected =
                        pending == nil ? nil : .log("screen unlocked within the grace period (\(source)); keys kept")
                case .resumed, .authenticated, .itemUse: expected = nil
                }
                if action != expected {
                    return "event \(i) answered \(String(describing: action)), not \(String(describing: expected))"
                }
                if case .itemUse = event, settings.idleLimit != nil { lastUse = t }
                // Nothing may be overdue when an event is handled (the timer ran first).
                if let report = pending, report.time + settings.grace < t {
                    return "event \(i) at \(t): the lock reported at \(report.time) is overdue"
                }
                if let idle = settings.idleLimit, lastUse + idle < t {
                    return "event \(i) at \(t): the idle lock is overdue"
                }
            case .fired(let t, .lock(let reason)) where reason.hasPrefix("screen locked"):
                // Exactly one grace period after the report that started it, naming its source.
                guard let report = pendingReport(before: i) else { return "fired \(i): no screen lock was pending" }
                if t != report.time + settings.grace {
                    return "fired \(i) at \(t), not \(report.time + settings.grace)"
                }
                if reason != "screen locked (\(report.source))" {
                    return "fired \(i) names the wrong source: \(reason)"
                }
            case .fired(let t, .lock(let reason)):
                guard let idle = settings.idleLimit else { return "fired \(i): an idle lock without an idle limit" }
                if reason != "no keychain use for \(LockSchedule.describe(seconds: idle))" {
                    return "fired \(i): \(reason)"
                }
                if t != lastUse + idle { return "idle lock \(i) at \(t), not \(lastUse + idle)" }
                lastUse = t
            case .fired(_, .log):
                return "fired \(i): a timer only locks"
            }
        }
        // At the end of the trace nothing is overdue either (the tail outlasts every timer).
        if pendingReport(before: entries.count) != nil { return "a screen lock never fired" }
        if let idle = settings.idleLimit, lastUse + idle <= end {
            return "the idle lock due at \(lastUse + idle) never fired"
        }
        return nil
    }
}
