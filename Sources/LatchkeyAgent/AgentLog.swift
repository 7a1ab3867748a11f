import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// The agent's log: one line per event on standard error (the journal under systemd, agent.log when
/// started on demand). Never given a secret, an account name or an attribute value.
///
/// A thin namespace over ``logger``, so the agent's call sites stay one short call each; the line format
/// and the cap on agent.log belong to the handler `latchkeyd` bootstraps (`AgentLogHandler` in
/// LatchkeyLog). Modules the agent hands a logger to (the Secret Service) take ``logger`` itself.
package enum AgentLog {
    /// How much a line matters: swift-log's levels (the agent uses info, warning and error).
    package typealias Level = Logger.Level

    /// The agent's logger. Made on first use, which `AgentMain.run` puts after `LoggingSystem.bootstrap`;
    /// code run without the bootstrap (tests) gets swift-log's default handler instead.
    package static let logger = Logger(label: "latchkeyd")

    package static func write(_ level: Level, _ message: String) { logger.log(level: level, "\(message)") }

    /// Writes a message to standard error as it is (usage errors).
    package static func printError(_ message: String) {
        var bytes = Array(message.utf8)
        _ = Glibc.write(2, &bytes, bytes.count)
    }

    package static func info(_ message: String) { logger.info("\(message)") }
    package static func warning(_ message: String) { logger.warning("\(message)") }
    package static func error(_ message: String) { logger.error("\(message)") }
}
