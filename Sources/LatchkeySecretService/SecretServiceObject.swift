import LatchkeyDBus
import LatchkeyEngine

/// What every Secret Service object shares. One type per D-Bus interface (`ServiceObject`,
/// `CollectionObject`, `ItemObject`, `SessionObject`, `PromptObject`) holds its table and its
/// handlers; `SecretService.dispatch` makes a value of the type for each call, on the loop thread.
protocol SecretServiceObject: BusObject {
    var service: SecretService { get }
    /// The connection the call came on, for replies' side effects (signals).
    var bus: Bus { get }
}

extension SecretServiceObject {
    /// Every call is read within the service's caps (docs/SECRET-SERVICE.md §6).
    static var readLimits: ReadLimits { Arguments.limits }
    /// A `Set` may carry an attribute map (`Item.Attributes`): refused past the map's cap while read.
    static var propertyWriteLimits: ReadLimits { Arguments.attributeLimits }

    var engine: SecretServiceKeychain { service.engine }
    var sessions: SessionRegistry { service.sessions }
    var prompts: PromptRegistry { service.prompts }
}
