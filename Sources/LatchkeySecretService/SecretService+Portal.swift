import LatchkeyApplications
import LatchkeyDBus

/// Serving the Secret portal's backend (`PortalObject`, docs/PORTAL.md) and deciding who may call it.
extension SecretService {
    /// Serves /org/freedesktop/portal/desktop and the request handles under it.
    func servePortal(_ bus: Bus) throws {
        try bus.addFallback(prefix: SS.Portal.path) { [self] call in
            try self.dispatchPortal(call, bus)
        }
    }

    private func dispatchPortal(_ call: BusMessage, _ bus: Bus) throws -> Bus.Dispatch {
        guard call.kind == .methodCall, let path = call.path else { return .notHandled }
        if path == SS.Portal.path {
            try PortalObject(service: self, bus: bus).dispatch(call)
            return .handled
        }
        if path.hasPrefix(SS.Portal.requestPrefix + "/") {
            try PortalRequestObject().dispatch(call)
            return .handled
        }
        // Left to sd-bus, a path under a fallback would be UnknownMethod: say what it is.
        throw BusError(name: BusError.Name.unknownObject, message: "no object at \(path)")
    }

    /// The identity of `sender` if it may retrieve portal secrets; AccessDenied otherwise. Two checks,
    /// both required (docs/PORTAL.md "Who may call"):
    ///
    /// 1. the agent's policy: the client's process is xdg-desktop-portal as an application file names
    ///    it with `Privileges=PortalSecrets` (`BusClientPolicy.mayRetrievePortalSecrets`);
    /// 2. the client owns `org.freedesktop.portal.Desktop` now: it is the portal applications talk to,
    ///    not another run of the same program (one started to ask with ids of its choosing).
    func portalClient(_ sender: String, _ bus: Bus) throws -> CallerIdentity {
        let identity = busCallers.identity(of: sender, on: bus)
        guard let identity, policy.mayRetrievePortalSecrets(identity) else {
            log.warning(
                "Secret portal: refused \(sender) (\(identity.map(describe) ?? "no credentials")): not entitled")
            throw BusError(
                name: BusError.Name.accessDenied, message: "only xdg-desktop-portal may retrieve portal secrets")
        }
        let owner = try? bus.call(
            destination: SS.daemon, path: SS.daemonPath, interface: SS.daemon, member: "GetNameOwner",
            [.string(SS.Portal.desktop)], timeout: .seconds(1)
        ).arguments().first?.string
        guard owner == sender else {
            log.warning("Secret portal: refused \(sender): it does not own \(SS.Portal.desktop)")
            throw BusError(
                name: BusError.Name.accessDenied,
                message: "only the owner of \(SS.Portal.desktop) may retrieve portal secrets")
        }
        return identity
    }

    private func describe(_ identity: CallerIdentity) -> String {
        "pid \(identity.pid), \(identity.executable?.path ?? "executable unknown")"
    }
}
