import Logging

/// The swift-log backend of `latchkeyd`: each event becomes one ``LogLine`` on a ``LogOutput``
/// (standard error: the journal under systemd, agent.log when a client started the agent).
///
/// Only the executable bootstraps it (`LoggingSystem.bootstrap`); the agent's modules just take a
/// `Logger`. The default level is `info`, so `debug` and `trace` events are dropped unless a logger
/// lowers its level.
public struct AgentLogHandler: LogHandler {
    /// Events below this level are dropped.
    public var logLevel: Logger.Level = .info
    /// Printed after the message as ` key=value`; empty in everything the agent logs today.
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?

    private let output: LogOutput

    /// A handler writing to `output`, with the bootstrapped metadata provider (if any).
    public init(output: LogOutput = .standardError,
                metadataProvider: Logger.MetadataProvider? = LoggingSystem.metadataProvider) {
        self.output = output
        self.metadataProvider = metadataProvider
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
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
