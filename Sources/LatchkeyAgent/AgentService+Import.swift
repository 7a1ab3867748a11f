import LatchkeyEngine
import LatchkeyModel
import LatchkeySecretService

extension AgentService {
    /// `importSecretServiceItem` (`latchkey migrate`): one item of another Secret Service provider,
    /// stored through the same engine API as the D-Bus `CreateItem` (`SecretServiceKeychain`), for the
    /// socket's caller with its access groups, so an unlisted program's items land in `default`, where
    /// Secret Service clients find them. The reply names the outcome and the collection.
    func importSecretServiceItem(_ dictionary: SecDictionary, caller: Caller) throws(SecError) -> SecValue {
        let item = try SecretServiceImportItem(decoding: dictionary)
        let (outcome, collection) = try keychain.secretService(for: caller).importItem(item)
        // Not logged item by item: a migration of thousands would push everything else out of the
        // capped agent.log. The command itself reports every item.
        return .dictionary([
            SecretServiceImportItem.Key.outcome: .string(outcome.rawValue),
            SecretServiceImportItem.Key.collectionID: .string(collection),
        ])
    }
}
