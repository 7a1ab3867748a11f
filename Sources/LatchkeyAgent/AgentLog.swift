#if canImport(Glibc)
import Glibc
#endif

/// The agent's log: one line per event on standard error (the journal under systemd, agent.log when
/// started on demand). Never given a secret, an account name or an attribute value.
public enum AgentLog {
    public enum Level: String, Sendable {
        case info
        case warning
        case error
    }

    public static func write(_ level: Level, _ message: String) {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var tm = tm()
        var seconds = now.tv_sec
        gmtime_r(&seconds, &tm)
        let stamp = String(format4: Int(tm.tm_year) + 1900) + "-" + String(format2: Int(tm.tm_mon) + 1) + "-"
            + String(format2: Int(tm.tm_mday)) + "T" + String(format2: Int(tm.tm_hour)) + ":"
            + String(format2: Int(tm.tm_min)) + ":" + String(format2: Int(tm.tm_sec)) + "Z"
        let line = "\(stamp) latchkeyd[\(getpid())] \(level.rawValue): \(message)\n"
        var bytes = Array(line.utf8)
        _ = Glibc.write(2, &bytes, bytes.count) // one write per line: lines from threads never interleave
    }

    /// Writes a message to standard error as it is (usage errors).
    public static func printError(_ message: String) {
        var bytes = Array(message.utf8)
        _ = Glibc.write(2, &bytes, bytes.count)
    }

    public static func info(_ message: String) { write(.info, message) }
    public static func warning(_ message: String) { write(.warning, message) }
    public static func error(_ message: String) { write(.error, message) }
}

private extension String {
    init(format2 value: Int) { self = value < 10 ? "0\(value)" : "\(value)" }
    init(format4 value: Int) { self = String(value) }
}
