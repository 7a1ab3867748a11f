import Logging

/// The swift-log backend of `latchkeyd`: each event becomes one ``LogLine`` on a ``LogOutput``
/// (standard error: the journal under systemd, agent.log when a client started the agent).
///
/// Only the executable bootstraps it (`LoggingSystem.bootstrap`); the agent's modules just take a
/// `Logger`. The default level is `info`, so `debug` and `trace` events are dropped unless a logger
/// lowers its level.
package struct AgentLogHandler: LogHandler {
    /// Events below this level are dropped.
    package var logLevel: Logger.Level = .info
    /// Printed after the message as ` key=value`; empty in everything the agent logs today.
    package var metadata: Logger.Metadata = [:]
    package var metadataProvider: Logger.MetadataProvider?

    private let output: LogOutput

    /// A handler writing to `output`, with the bootstrapped metadata provider (if any).
    package init(
        output: LogOutput = .standardError,
        metadataProvider: Logger.MetadataProvider? = LoggingSystem.metadataProvider
    ) {
        self.output = output
        self.metadataProvider = metadataProvider
    }

    package subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    package func log(event: LogEvent) {
        output.write(LogLine.now(event.level, event.message.description, metadata: effectiveMetadata(event)))
    }

    /// The handler's metadata, then the provider's, then the event's (later ones win), and the error as
    /// swift-log's own stream handler names it; nil when there is none, so the line ends with the message.
    private func effectiveMetadata(_ event: LogEvent) -> Logger.Metadata? {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { _, new in new } }
        if let explicit = event.metadata { merged.merge(explicit) { _, new in new } }
        if let error = event.error {
            merged["error.message"] = "\(error)"
            merged["error.type"] = "\(String(reflecting: type(of: error)))"
        }
        return merged.isEmpty ? nil : merged
    }
}
