import LatchkeyApplications
import LatchkeyEngine
import LatchkeyModel
import LatchkeySecretService
import LatchkeySystem

#if canImport(Glibc)
    import Glibc
#endif

/// The one place where the agent turns who is calling into what the caller may reach (issue 12): the
/// identity the kernel vouches for (`CallerIdentification`), through the application files in force
/// (`ApplicationRegistryWatch`, docs/APPLICATIONS.md), into the engine's `Caller` with its access groups;
/// widened only by what the connection proved with the keychain password (`GroupAuthorization`). The
/// engine's `AccessGroupPolicy` then decides each request on those groups.
package final class CallerPolicy: Sendable {
    /// The environment variable that names other application directories than the packaged ones
    /// (colon-separated, lowest precedence first), for tests. Honoured only by an agent running as root:
    /// any process of the user can start the agent, and with it choose which of root's files count (none,
    /// or the packages' without the administrator's overrides), so a user's agent ignores it and says so.
    /// The directories then count under the same rule as the default ones (owned by root and writable by
    /// root only, every directory above too).
    package static let directoriesVariable = "LATCHKEY_APPLICATIONS_DIRS"

    let applications: ApplicationRegistryWatch
    /// Asks the user for the bus clients' user checks (nil: nobody can be asked).
    let presence: UserPresence?

    package init(directories: [String]? = nil, presence: UserPresence? = nil) {
        self.presence = presence
        let chosen = directories ?? Self.configuredDirectories()
        applications = ApplicationRegistryWatch(directories: chosen)
        if chosen != ApplicationRegistry.defaultDirectories {
            AgentLog.info("application files are read from \(chosen.joined(separator: ":"))")
        }
    }

    /// The directories `LATCHKEY_APPLICATIONS_DIRS` names (absolute paths only) for an agent whose
    /// effective uid is root, or the default ones.
    static func configuredDirectories(euid: uid_t = geteuid()) -> [String] {
        guard let value = Environment.value(directoriesVariable), !value.isEmpty else {
            return ApplicationRegistry.defaultDirectories
        }
        guard euid == 0 else {
            AgentLog.warning(
                "\(directoriesVariable) is ignored: only an agent running as root honours it (tests); "
                    + "application files are read from the default directories")
            return ApplicationRegistry.defaultDirectories
        }
        let named = value.split(separator: ":").map(String.init).filter { $0.hasPrefix("/") }
        return named.isEmpty ? ApplicationRegistry.defaultDirectories : named
    }

    /// The caller a request of `identity` is: its grant's groups, and no others unless `authorization`
    /// adds them. A caller of another uid (root's pam_latchkey) gets no group: it may not touch items.
    func caller(_ identity: CallerIdentity, authorization: GroupAuthorization) -> Caller {
        guard identity.uid == getuid() else {
            return Caller(uid: identity.uid, pid: identity.pid, accessGroups: [], mayUseAnyGroup: false)
        }
        let grant = applications.current().grant(for: identity)
        // The executable names the caller (in a prompt, docs/ACCESS-CONTROL.md) only when nothing casts
        // doubt on it: a doubted process (traced, a loader variable, another namespace) could show any
        // trusted path while other code runs.
        let base = Caller(
            uid: identity.uid, pid: identity.pid, executable: identity.doubts.isEmpty ? identity.executable?.path : nil,
            accessGroups: grant.accessGroups, mayUseAnyGroup: false)
        return authorization.applied(to: base)
    }
}

/// A caller `CallerPolicy` made for a connection, with what it was made from: the connection's standing
/// and authorization, and until when the application files it was read from count as current.
struct DecidedCaller: Sendable {
    let caller: Caller
    let standing: IdentityStanding
    let authorization: GroupAuthorization
    let until: ContinuousClock.Instant
}

extension CallerPolicy {
    /// How long a connection reuses the caller made for it: the application files are looked at no
    /// more often than this anyway (`ApplicationRegistryWatch`), so a change to them reaches an open
    /// connection as soon as it reaches a new one.
    static let decisionLifetime: Duration = .seconds(1)

    /// The caller the next request of `connection` is decided as: `caller(_:authorization:)` of its
    /// identity as its standing carries it, made at most once per `decisionLifetime` while the
    /// standing and authorization stay as they were (every request used to pay for a look at the
    /// registry and the grant: about 2 µs).
    func caller(for connection: inout Connection, now: ContinuousClock.Instant = .now) -> Caller {
        if let decided = connection.decided, now < decided.until, decided.standing == connection.standing,
            decided.authorization == connection.authorization
        {
            return decided.caller
        }
        let caller = caller(
            connection.standing.identity(for: connection.identity), authorization: connection.authorization)
        connection.decided = DecidedCaller(
            caller: caller, standing: connection.standing, authorization: connection.authorization,
            until: now + Self.decisionLifetime)
        return caller
    }
}

/// What a connection proved with the keychain password (`authorizeGroups`): groups it may use besides its
/// caller's own, or every group. It lasts as long as the connection.
struct GroupAuthorization: Sendable, Equatable {
    var groups: [String] = []
    var everyGroup = false

    /// `caller` with these groups added after its own (its first group, where new items go, unchanged).
    func applied(to caller: Caller) -> Caller {
        guard everyGroup || !groups.isEmpty else { return caller }
        var widened = caller
        if everyGroup { widened.mayUseAnyGroup = true }
        for group in groups where !widened.accessGroups.contains(where: { Caller.sameAccessGroup($0, group) }) {
            widened.accessGroups.append(group)
        }
        return widened
    }
}

/// The Secret Service's clients get their groups here too, as the socket's callers do; a bus client
/// proves nothing with the keychain password (`authorizeGroups` is the socket's).
extension CallerPolicy: BusClientPolicy {
    package func caller(ofBusClient identity: CallerIdentity?) -> Caller {
        guard let identity else { return UnlistedBusClients().caller(ofBusClient: nil) }
        return caller(identity, authorization: GroupAuthorization())
    }

    package func checkUserPresence(_ requirement: UserCheckRequirement, for caller: Caller, dismissed: () -> Bool)
        throws(SecError) -> Set<UserCheckKind>
    {
        guard let presence else {
            throw SecError(SecStatus.interactionNotAllowed, "no user check can be asked for here")
        }
        return try presence.check(requirement, caller: caller, clientGone: dismissed)
    }
}
