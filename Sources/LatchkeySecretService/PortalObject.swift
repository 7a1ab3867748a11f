import LatchkeyApplications
import LatchkeyDBus
import LatchkeyEngine
import LatchkeyModel
import LatchkeySecrets

/// `org.freedesktop.impl.portal.Secret` at /org/freedesktop/portal/desktop (docs/PORTAL.md): the
/// backend of xdg-desktop-portal's Secret portal, on the Secret Service's own connection, where
/// gnome-keyring serves it (`daemon/dbus/gkd-secret-portal.c`).
///
/// The contract, from flatpak/xdg-desktop-portal (`data/org.freedesktop.impl.portal.Secret.xml`,
/// `src/secret.c`): the frontend calls `RetrieveSecret(o handle, s app_id, h fd, a{sv} options)` for a
/// sandboxed application, the backend writes the application's master secret to `fd` and replies
/// `(u response, a{sv} results)`: 0 for success, 1 cancelled, 2 any other end. An error reply is
/// response 2 to the application, as the frontend turns it into one. The only option is `token`
/// (`s`, opaque, unused here). `version` is 1.
///
/// What is refused, and how: a caller that is not xdg-desktop-portal, AccessDenied (before anything
/// else is looked at); an app_id that is not a Flatpak id (a host application's is empty) or a `fd`
/// that is no pipe or socket, InvalidArgs; a locked keychain, or a `fd` that cannot take the secret at
/// once, response 2 with nothing written. The descriptor is never closed here: it is the message's,
/// and sd-bus closes it with the message once the reply is sent, so the reader sees the end of the
/// secret, or of nothing.
struct PortalObject: SecretServiceObject {
    let service: SecretService
    let bus: Bus

    /// `RetrieveSecret`'s responses (the portal documentation's `Request::Response` codes).
    enum Response: UInt32 {
        case success = 0
        case other = 2
    }

    /// The version of the backend interface this serves.
    static let version: UInt32 = 1

    static let interfaces = [
        BusInterface<PortalObject>(
            SS.Portal.secret,
            methods: [
                BusMethod(
                    "RetrieveSecret",
                    in: [("handle", "o"), ("app_id", "s"), ("fd", "h"), ("options", "a{sv}")],
                    out: [("response", "u"), ("results", "a{sv}")]
                ) { try $0.retrieveSecret($1) }
            ],
            properties: [
                BusProperty("version", "u") { _ in .uint32(PortalObject.version) }
            ])
    ]

    func retrieveSecret(_ call: BusMethodCall) throws {
        _ = try call.objectPath(0)  // nothing is kept there: see PortalRequestObject
        let appID = try call.string(1)
        let fd = try call.unixFD(2)
        let identity = try service.portalClient(call.sender, bus)
        // Flatpak's own rule (`flatpak_is_valid_name`), as the agent applies it to a sandbox's id.
        guard FlatpakInfo.isValidApplicationID(appID) else {
            throw BusError.invalidArgs("app_id is not a Flatpak application id")
        }
        try Self.checkOptions(call.arguments[3])
        do {
            try PortalSecretDelivery.check(fd)
        } catch {
            throw BusError.invalidArgs("fd: \(error)")
        }
        // The engine sees the application itself asking for its own group's data: the portal acts for
        // it, and the secret is refused to any caller without that group.
        let application = Caller(
            uid: identity.uid, pid: identity.pid, executable: identity.executable?.path, accessGroups: [appID],
            mayUseAnyGroup: false)
        let secret: SecretBytes
        do {
            secret = try service.keychain.portalSecret(forApplication: appID, caller: application)
        } catch {
            service.log.debug("Secret portal: no secret for \(appID): \(error)")
            return try call.reply([.uint32(Response.other.rawValue), Self.noResults])
        }
        // The copy runs in a process of its own and is waited for on another thread; the call is
        // answered on the loop when it is done (`PortalSecretDelivery`). Debug only: every sandboxed
        // application can make the portal ask, as often as it likes.
        let pending = PendingReply(call.message)
        let log = service.log
        let connection = service.connection
        let started = PortalSecretDelivery.deliver(secret, to: fd) { failure in
            if let failure {
                log.debug("Secret portal: no secret for \(appID): \(failure)")
            } else {
                log.debug("Secret portal: wrote the secret of \(appID)")
            }
            let response = failure == nil ? Response.success : Response.other
            _ = connection.perform { _ in pending.reply([.uint32(response.rawValue), PortalObject.noResults]) }
        }
        if !started {
            log.debug(
                "Secret portal: no secret for \(appID): \(PortalSecretDelivery.maximumRunning) copies still running")
            try call.reply([.uint32(Response.other.rawValue), Self.noResults])
        }
    }

    /// A call answered later, on the loop thread (the only thread that touches it). The message, and
    /// with it the caller's descriptor, is let go as soon as it is answered.
    final class PendingReply: @unchecked Sendable {
        private var message: BusMessage?
        init(_ message: BusMessage) { self.message = message }

        func reply(_ values: [BusValue]) {
            try? message?.reply(values)
            message = nil
        }
    }

    static let noResults = BusValue.dictionary(keyType: "s", valueType: "v", [])

    /// `token` must be a string if it is there; other keys are left for later versions of the portal.
    static func checkOptions(_ options: BusValue) throws {
        guard let entries = options.stringKeyedEntries else { throw BusError.invalidArgs("options is not a{sv}") }
        if let token = entries["token"] {
            guard case .string? = token.variantValue else {
                throw BusError.invalidArgs("the option token is not a string")
            }
        }
    }
}

/// `org.freedesktop.impl.portal.Request` at a request's `handle`. xdg-desktop-portal calls `Close` on
/// it when the application closes its request; a backend exports it while the request runs (gnome-
/// keyring for the whole call). Here a request runs within one handler on the loop thread, so by the
/// time a `Close` is served the request it names has already ended: there is nothing to cancel, and
/// `Close` succeeds for any caller (so the frontend's own `Close` does not fail with UnknownObject).
struct PortalRequestObject: BusObject {
    static let interfaces = [
        BusInterface<PortalRequestObject>(
            SS.Portal.request,
            methods: [
                BusMethod("Close") { _, call in try call.reply() }
            ])
    ]
}
