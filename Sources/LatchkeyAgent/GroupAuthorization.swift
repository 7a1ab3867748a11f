import LatchkeyEngine
import LatchkeyModel
import LatchkeySecrets
import LatchkeyWire

/// `authorizeGroups` (docs/PROTOCOL.md): the keychain password, given again on one connection, lets that
/// connection use access groups beyond its caller's own, as the administrator's tool (`latchkey
/// --access-group`) asks. What an application may use is decided by its application file; this is the
/// user saying, with the password, "this once, let me reach those groups".
extension AgentService {
    /// Adds `groups` (every group for `Request.allAccessGroups`) to what the connection may use once
    /// `password` is the keychain password; errSecAuthFailed otherwise (nothing changes), errSecParam for
    /// a group name that is not one. New items still go to the caller's first group unless a request
    /// names another.
    func authorize(
        _ groups: [String], password: SecretBytes, caller: Caller, into authorization: inout GroupAuthorization
    ) throws(SecError) {
        for group in groups where !Self.isAccessGroupName(group) {
            throw .param("'\(group.prefix(64))' is not an access group name")
        }
        do {
            try keychain.verify(password: password)
        } catch {
            AgentLog.warning("pid \(caller.pid) gave a wrong keychain password for access groups")
            throw error
        }
        if groups.contains(Request.allAccessGroups) {
            authorization.everyGroup = true
        } else {
            for group in groups where !authorization.groups.contains(where: { Caller.sameAccessGroup($0, group) }) {
                authorization.groups.append(group)
            }
        }
        AgentLog.info(
            "pid \(caller.pid) authorized with the keychain password: "
                + (authorization.everyGroup ? "every access group" : "access groups \(authorization.groups)"))
    }

    /// An access group's name: 1 to `Request.maxAccessGroupLength` bytes, no control characters (they
    /// would garble the agent's log and the CLI's output); or `*`, every group.
    static func isAccessGroupName(_ group: String) -> Bool {
        !group.isEmpty && group.utf8.count <= Request.maxAccessGroupLength
            && !group.unicodeScalars.contains { $0.properties.generalCategory == .control }
    }
}
