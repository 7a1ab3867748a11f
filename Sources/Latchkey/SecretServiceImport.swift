import LatchkeyModel
import LatchkeyWire

/// One Secret Service item to copy into the keychain (`latchkey migrate`, docs/MIGRATING.md): the
/// agent stores it as the D-Bus `CreateItem` would, for this process's access groups. For the
/// `latchkey` command only; not part of Apple's API.
package struct SecretServiceImport {
    /// The keychain collection by label; nil is the default collection (`login`).
    package var collectionLabel: String?
    package var label: String
    /// Attribute names and values, in any order; a name may appear once.
    package var attributes: [(name: String, value: String)]
    /// The secret's bytes. The caller wipes its own copy; the encoded request is wiped once sent.
    package var secret: [UInt8]
    package var contentType: String
    /// `keep`, `replace` or `duplicate`: what to do when an item with the same attributes differs.
    package var onConflict: String
    /// Only ask what would happen.
    package var dryRun: Bool

    package init(
        collectionLabel: String?, label: String, attributes: [(name: String, value: String)], secret: [UInt8],
        contentType: String, onConflict: String, dryRun: Bool
    ) {
        self.collectionLabel = collectionLabel
        self.label = label
        self.attributes = attributes
        self.secret = secret
        self.contentType = contentType
        self.onConflict = onConflict
        self.dryRun = dryRun
    }

    /// The request's dictionary (docs/PROTOCOL.md, "importSecretServiceItem").
    var dictionary: SecDictionary {
        var d: SecDictionary = [
            "label": .string(label),
            "attributes": .array(attributes.flatMap { [SecValue.string($0.name), .string($0.value)] }),
            "secret": .data(secret),
            "contentType": .string(contentType),
            "onConflict": .string(onConflict),
            "dryRun": .bool(dryRun),
        ]
        if let collectionLabel { d["collection"] = .string(collectionLabel) }
        return d
    }
}

extension KeychainControl {
    /// Sends one item to the agent (`importSecretServiceItem`); returns the outcome (`added`,
    /// `unchanged`, `kept`, `replaced`, `duplicated`) and the keychain collection's id.
    package static func importSecretServiceItem(_ item: SecretServiceImport) throws(Failure)
        -> (outcome: String, collection: String)
    {
        let request = Request.importSecretServiceItem(item.dictionary)
        let response = AgentClient.shared.send(request)
        request.wipeItemData()
        guard response.status == SecStatus.success else {
            throw Failure(status: response.status, detail: response.message)
        }
        guard case .dictionary(let d)? = response.value, case .string(let outcome)? = d["outcome"],
            case .string(let collection)? = d["collectionID"]
        else {
            throw Failure(status: SecStatus.decode, detail: "malformed importSecretServiceItem reply")
        }
        return (outcome, collection)
    }
}

extension KeychainControl {
    /// The agent's process id (`hello`), starting the agent if none runs.
    package static func agentProcessID() throws(Failure) -> Int32 {
        let response = AgentClient.shared.send(.hello)
        guard response.status == SecStatus.success else {
            throw Failure(status: response.status, detail: response.message)
        }
        guard case .dictionary(let d)? = response.value, case .int(let pid)? = d[HelloKey.pid],
            let pid32 = Int32(exactly: pid)
        else {
            throw Failure(status: SecStatus.decode, detail: "malformed hello reply")
        }
        return pid32
    }
}
