#if canImport(Glibc)
import Glibc
#endif
import Logging

/// The agent's log: one line per event on standard error (the journal under systemd, agent.log when
/// started on demand). Never given a secret, an account name or an attribute value.
///
/// A thin namespace over ``logger``, so the agent's call sites stay one short call each; the line format
/// and the cap on agent.log belong to the handler `latchkeyd` bootstraps (`AgentLogHandler` in
/// LatchkeyLog). Modules the agent hands a logger to (the Secret Service) take ``logger`` itself.
public enum AgentLog {
    /// How much a line matters: swift-log's levels (the agent uses info, warning and error).
    public typealias Level = Logger.Level

    /// The agent's logger. Made on first use, which `AgentMain.run` puts after `LoggingSystem.bootstrap`;
    /// code run without the bootstrap (tests) gets swift-log's default handler instead.
    public static let logger = Logger(label: "latchkeyd")

    public static func write(_ level: Level, _ message: String) { logger.log(level: level, "\(message)") }

    /// Writes a message to standard error as it is (usage errors).
    public static func printError(_ message: String) {
        var bytes = Array(message.utf8)
        _ = Glibc.write(2, &bytes, bytes.count)
    }

    public static func info(_ message: String) { logger.info("\(message)") }
    public static func warning(_ message: String) { logger.warning("\(message)") }
    public static func error(_ message: String) { logger.error("\(message)") }
}
