import LatchkeyApplications
import LatchkeyEngine
import LatchkeyModel

#if canImport(Glibc)
    import Glibc
#endif

/// What the agent decides about a client of its bus services (docs/IDENTITY.md §4): the Secret Service
/// asks, the agent's one place of policy (`CallerPolicy`) answers, for bus calls as for socket requests.
package protocol BusClientPolicy: Sendable {
    /// The caller that a request of the bus client with `identity` is put to the engine as (`nil`: the
    /// bus daemon gave no credentials for it).
    func caller(ofBusClient identity: CallerIdentity?) -> Caller

    /// Whether the bus client with `identity` may retrieve any Flatpak application's portal secret
    /// (`org.freedesktop.impl.portal.Secret`, docs/PORTAL.md): xdg-desktop-portal, named by an
    /// application file that grants it `Privileges=PortalSecrets`, and nothing else.
    func mayRetrievePortalSecrets(_ identity: CallerIdentity?) -> Bool

    /// Asks the user for `requirement` on behalf of `caller` (an `Unlock` of items whose access control
    /// needs the user present, docs/SECRET-SERVICE.md §4c): the agent's PAM transaction and prompt, as
    /// for its socket's requests. Returns the checks that passed, or errSecUserCanceled,
    /// errSecAuthFailed, errSecInteractionNotAllowed. `dismissed` says whether the prompt was dismissed
    /// (its client left or called `Dismiss`): the check then ends. Blocks; never on the bus loop thread.
    func checkUserPresence(_ requirement: UserCheckRequirement, for caller: Caller, dismissed: () -> Bool)
        throws(SecError) -> Set<UserCheckKind>
}

extension BusClientPolicy {
    /// Where the agent gives no policy, nobody can be asked.
    package func checkUserPresence(_ requirement: UserCheckRequirement, for caller: Caller, dismissed: () -> Bool)
        throws(SecError) -> Set<UserCheckKind>
    {
        throw SecError(SecStatus.interactionNotAllowed, "no user check can be asked for here")
    }
}

/// Every bus client is an unlisted program of the user: it may use the `default` group only. What the
/// Secret Service does where the agent gives no policy (tests of the service alone).
package struct UnlistedBusClients: BusClientPolicy {
    package init() {}

    package func caller(ofBusClient identity: CallerIdentity?) -> Caller {
        Caller(
            uid: getuid(), pid: identity?.pid ?? 0, accessGroups: [Caller.defaultAccessGroup],
            mayUseAnyGroup: false)
    }

    /// No client: an unlisted program never may.
    package func mayRetrievePortalSecrets(_ identity: CallerIdentity?) -> Bool { false }
}
