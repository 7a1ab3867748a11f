import LatchkeyModel

/// What a request does to the items it concerns, as the access policy sees it.
package enum AccessKind: Sendable, Equatable, CaseIterable {
    /// Adds items (SecItemAdd, generateKey, Secret Service CreateItem).
    case add
    /// Finds items and reads their attributes, references or persistent references, not their data.
    case readAttributes
    /// Reads items' data (`kSecReturnData`, a key's export, a Secret Service secret).
    case readData
    /// Changes items (SecItemUpdate; Secret Service labels, attributes, secrets and collections).
    case update
    /// Deletes items.
    case delete
    /// Uses a private key without reading it: sign, decrypt, key exchange.
    case useKey
}

/// One request as the access policy sees it: who asks, to do what, to which items.
package struct AccessRequest: Sendable, Equatable {
    package var kind: AccessKind
    package var caller: Caller
    package var itemClass: ItemClass
    /// The access groups the request names: the group new items go to, the group a query filters on,
    /// the group an update moves items to. Empty when it names none.
    package var accessGroups: [String]
    /// The attributes the request gives: a new item's, or a query's filters.
    package var attributes: SecDictionary
    /// What an update changes; empty for other requests.
    package var changes: SecDictionary

    package init(
        _ kind: AccessKind, caller: Caller, itemClass: ItemClass, accessGroups: [String] = [],
        attributes: SecDictionary = [:], changes: SecDictionary = [:]
    ) {
        self.kind = kind
        self.caller = caller
        self.itemClass = itemClass
        self.accessGroups = accessGroups
        self.attributes = attributes
        self.changes = changes
    }
}

/// Which access groups' items a request sees and touches: the items of every other group are, for it,
/// not there (Apple's `agrp IN (<caller groups>)`, docs/APPLICATIONS.md).
package enum GroupScope: Sendable, Equatable {
    /// Every group (a caller trusted with all of them).
    case all
    /// Only these groups.
    case only([String])

    /// Whether an item of `group` is within the scope.
    package func contains(_ group: String) -> Bool {
        switch self {
        case .all: true
        case .only(let groups): groups.contains { Caller.sameAccessGroup($0, group) }
        }
    }
}

/// The policy's answer to one request.
package enum AccessDecision: Sendable, Equatable {
    case allow
    /// The request fails with this error (its status is what the caller sees) and changes nothing.
    case deny(SecError)
}

/// Who may do what with which items. Every item request of the socket and of the Secret Service is put
/// to the engine's policy once, by `RequestGate`, before it touches the store; a request that adds
/// items and names no group is first given the caller's default group, so that where new items go is
/// decided here too.
///
/// Today's rules are `AccessGroupPolicy`. Access groups from a verified caller identity, user presence
/// per item and the token that holds a key are decisions to add here (a policy sees the request's
/// kind, caller, class, groups and attributes), not checks to scatter through the item code.
package protocol AccessPolicy: Sendable {
    /// The access group an item goes to when the request adding it names none.
    func defaultAccessGroup(for caller: Caller) -> String
    /// Whether `request` may go ahead.
    func decide(_ request: AccessRequest) -> AccessDecision
    /// The groups whose items `caller`'s requests see and touch.
    func scope(for caller: Caller) -> GroupScope
}

extension AccessPolicy {
    /// The caller's own groups, or every group for a caller that may use any. (The token group's items
    /// are the tokens', not rows of the store: nothing is ever added to it, so no scope needs it.)
    package func scope(for caller: Caller) -> GroupScope {
        caller.mayUseAnyGroup ? .all : .only(caller.accessGroups)
    }
}

/// Apple's rules for access groups (docs/APPLICATIONS.md): a caller may use the groups
/// `Caller.mayUse(group:)` allows (its own, from the agent's `CallerPolicy`), may read but never write the
/// token group, and new items go to its first group.
package struct AccessGroupPolicy: AccessPolicy {
    package init() {}

    package func defaultAccessGroup(for caller: Caller) -> String {
        caller.accessGroups.first ?? Caller.defaultAccessGroup
    }

    package func decide(_ request: AccessRequest) -> AccessDecision {
        for group in request.accessGroups where Caller.sameAccessGroup(group, Caller.tokenAccessGroup) {
            switch request.kind {
            case .readAttributes, .readData, .useKey:
                continue
            case .add, .update, .delete:
                return .deny(
                    SecError(
                        SecStatus.missingEntitlement,
                        "the access group '\(group)' is read-only: its items are provided by tokens"))
            }
        }
        for group in request.accessGroups
        where !Caller.sameAccessGroup(group, Caller.tokenAccessGroup) && !request.caller.mayUse(group: group) {
            return .deny(
                SecError(SecStatus.missingEntitlement, "access group '\(group)' is not one of the caller's groups"))
        }
        return .allow
    }
}

/// The one place where the engine puts a request to its access policy.
struct RequestGate: Sendable {
    let policy: any AccessPolicy

    /// The groups whose items `caller`'s requests see and touch (`ItemRules.scope`).
    func scope(for caller: Caller) -> GroupScope {
        policy.scope(for: caller)
    }

    /// Asks the policy about `request`, after giving a request that adds items and names no group the
    /// caller's default group; returns the request as admitted (its groups are where new items go),
    /// or throws the policy's refusal.
    func admit(_ request: AccessRequest) throws(SecError) -> AccessRequest {
        var request = request
        if request.kind == .add && request.accessGroups.isEmpty {
            request.accessGroups = [policy.defaultAccessGroup(for: request.caller)]
        }
        if case .deny(let error) = policy.decide(request) { throw error }
        return request
    }

    /// Admits an add request and writes the group it was admitted to into the new item's attributes.
    func admit(_ add: inout AddRequest, caller: Caller) throws(SecError) {
        let named = add.attributes[SecAttr.accessGroup]?.stringValue
        let admitted = try admit(
            AccessRequest(
                .add, caller: caller, itemClass: add.itemClass,
                accessGroups: named.map { [$0] } ?? [], attributes: add.attributes))
        add.attributes[SecAttr.accessGroup] = .string(admitted.accessGroups.first ?? Caller.defaultAccessGroup)
    }

    /// Admits a query (and, for an update, its changes, two for an identity's halves): the groups they name.
    func admit(_ kind: AccessKind, _ query: ItemQuery, changes: [AttributeChanges] = [], caller: Caller)
        throws(SecError)
    {
        var groups: [String] = []
        for named in [query.attributes] + changes.map(\.attributes) {
            if let group = named[SecAttr.accessGroup]?.stringValue,
                !groups.contains(where: { Caller.sameAccessGroup($0, group) })
            {
                groups.append(group)
            }
        }
        var changed: SecDictionary = [:]
        for change in changes { changed.merge(change.attributes) { first, _ in first } }
        _ = try admit(
            AccessRequest(
                kind, caller: caller, itemClass: query.itemClass, accessGroups: groups,
                attributes: query.attributes, changes: changed))
    }
}
