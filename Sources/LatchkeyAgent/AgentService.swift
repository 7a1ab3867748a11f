import LatchkeyCrypto
import LatchkeyEngine
import LatchkeyModel
import LatchkeySecrets
import LatchkeySystem
import LatchkeyWire

#if canImport(Glibc)
    import Glibc
#endif

/// Maps protocol requests onto the engine. Knows nothing of sockets: the server hands it decoded
/// requests and the caller's identity, and sends back the response.
package final class AgentService: Sendable {
    /// The agent's version, reported by `hello`.
    package static let version = "0.1.0"

    let keychain: Keychain
    let sessions: SessionTracker
    /// Called for every SecItem request (the idle-lock clock).
    let onItemRequest: @Sendable () -> Void
    /// Called after an authenticated unlock (password or login hand-off): a screen lock still
    /// waiting out its grace period must not drop the keys just handed over.
    let onUnlock: @Sendable () -> Void
    /// Asks the user for the items that need a user check (kSecAttrAccessControl); nil: nobody can be
    /// asked, and such items are as with kSecUseAuthenticationUIFail.
    let presence: UserPresence?
    /// The `LAContext`s of the agent's callers (docs/ACCESS-CONTROL.md §7).
    let contexts: AuthenticationContexts

    package init(
        keychain: Keychain, onItemRequest: @escaping @Sendable () -> Void = {},
        onUnlock: @escaping @Sendable () -> Void = {}, presence: UserPresence? = nil
    ) {
        self.keychain = keychain
        self.presence = presence
        self.onItemRequest = onItemRequest
        self.onUnlock = onUnlock
        self.contexts = AuthenticationContexts(
            lockCount: { [keychain] in keychain.lockCount() },
            isRunning: AgentService.isRunning)
        let exits = Self.makeExitWatch()
        self.sessions = SessionTracker(exits: exits)
        followLoginProcesses(exits)
    }

    /// Answers one request. `peer` names the process at the other end of the connection (asked only
    /// when a session opens, while that process still waits for the answer). `authorization` is the
    /// connection's: `authorizeGroups` widens it for the connection's later requests. `process` is the
    /// process that wrote the request, when the connection's identity vouches for it (its
    /// authentication contexts are its own); nil: it can use none. `upload` is the connection's restore
    /// in progress (`restore`).
    func handle(
        _ request: Request, caller: Caller, authorization: inout GroupAuthorization, upload: inout RestoreUpload?,
        process: ContextOwner? = nil, clientGone: () -> Bool = { false },
        peer: () -> PeerProcess = { .unknown(reason: "no connection") }
    ) -> Response {
        switch request {
        case .add, .copyMatching, .update, .delete, .keyOperation, .generateKey, .importSecretServiceItem:
            onItemRequest()
        default: break
        }
        do {
            switch request {
            case .hello:
                return .ok(
                    .dictionary([
                        HelloKey.protocolVersion: .int(Int64(Wire.protocolVersion)),
                        HelloKey.agent: .string(AgentService.version),
                        HelloKey.pid: .int(Int64(getpid())),
                    ]))
            case .add(let attributes):
                return .ok(
                    try withUserChecks(
                        caller, context: try context(in: attributes, of: process),
                        password: try applicationPassword(in: attributes), clientGone: clientGone
                    ) {
                        checks throws(SecError) in
                        try keychain.add(attributes, caller: caller, checks: checks)
                    })
            case .copyMatching(let query):
                return .ok(
                    try withUserChecks(
                        caller, context: try context(in: query, of: process),
                        password: try applicationPassword(in: query), clientGone: clientGone
                    ) {
                        checks throws(SecError) in
                        try keychain.copyMatching(query, caller: caller, checks: checks)
                    })
            case .update(let query, let attributes):
                try withUserChecks(
                    caller, context: try context(in: query, of: process), password: try applicationPassword(in: query),
                    clientGone: clientGone
                ) {
                    checks throws(SecError) in
                    try keychain.update(query, attributes, caller: caller, checks: checks)
                }
                return .ok(nil)
            case .delete(let query):
                // A context that cannot serve fails every call it is given to, as Apple's.
                if let context = try context(in: query, of: process) {
                    _ = try contexts.evaluation(context.handle, of: context.owner)
                }
                try keychain.delete(query, caller: caller)
                return .ok(nil)
            case .keyOperation(let operation):
                return .ok(
                    try withUserChecks(caller, context: try context(in: operation, of: process), clientGone: clientGone)
                    {
                        checks throws(SecError) in
                        try keychain.keyOperation(operation, caller: caller, checks: checks)
                    })
            case .generateKey(let parameters):
                return .ok(try keychain.generateKey(parameters, caller: caller))
            case .evaluateContext(let fields):
                return .ok(try evaluateContext(fields, caller: caller, process: process, clientGone: clientGone))
            case .invalidateContext(let handle):
                if let process { contexts.invalidate(handle, of: process) }
                return .ok(nil)
            case .importSecretServiceItem(let dictionary):
                return .ok(try importSecretServiceItem(dictionary, caller: caller))
            case .status:
                return .ok(statusValue())
            case .create(let password, let options):
                let (parameters, allowWeak) = try argon2Options(options)
                try keychain.create(password: password, parameters: parameters, allowWeakParameters: allowWeak)
                AgentLog.info("created a keychain in \(keychain.location.directory)")
                return .ok(nil)
            case .unlock(let password):
                if let failure = unlockFailure(password) { throw failure }
                onUnlock()
                AgentLog.info("unlocked by pid \(caller.pid)")
                return .ok(nil)
            case .lock(let all):
                keychain.lock(all: all)
                AgentLog.info(
                    all
                        ? "locked all password classes (pid \(caller.pid))"
                        : "locked WhenUnlocked classes (pid \(caller.pid))")
                return .ok(nil)
            case .changePassword(let old, let new):
                try keychain.changePassword(old: old, new: new)
                AgentLog.info("keychain password changed by pid \(caller.pid)")
                return .ok(nil)
            case .authorizeGroups(let password, let groups):
                try authorize(groups, password: password, caller: caller, into: &authorization)
                return .ok(nil)
            case .backup(let password, let key, let options):
                return .ok(try backup(password: password, key: key, options: options, caller: caller))
            case .restore(let password, let key, let options):
                return .ok(
                    try restore(password: password, key: key, options: options, caller: caller, upload: &upload))
            case .keyHandoff(let masterKey, let deviceFactor):
                // Only root (pam_latchkey) can read the machine secret; a factor from anyone else is
                // ignored, so no process of the user can bind the keybag to a factor it chose.
                let factor = caller.uid == 0 ? deviceFactor : nil
                if deviceFactor != nil && factor == nil {
                    AgentLog.warning("ignored a device factor from pid \(caller.pid), which is not root")
                }
                do {
                    try keychain.handOff(masterKey: masterKey, deviceFactor: factor)
                    onUnlock()
                } catch {
                    AgentLog.warning(
                        "key hand-off from pid \(caller.pid) refused: \(error.detail ?? "status \(error.status)")")
                    throw error
                }
                let status = keychain.status()
                let deviceNote =
                    status.deviceBound && !status.deviceFactorHeld ? " (ThisDeviceOnly classes still locked)" : ""
                AgentLog.info("unlocked by a login (pam_latchkey, pid \(caller.pid))\(deviceNote)")
                return .ok(nil)
            case .sessionOpen(let token):
                try openSession(token, logindSession: nil, caller: caller, peer: peer())
                return .ok(nil)
            case .sessionOpenWithDetails(let token, let logindSession):
                try openSession(token, logindSession: logindSession, caller: caller, peer: peer())
                return .ok(nil)
            case .sessionClose(let token):
                switch sessions.close(token, whenNoneLeft: lockAll) {
                case .closed(remaining: 0):
                    AgentLog.info("last login session closed: locked all password classes")
                case .unknown(remaining: 0):
                    // A session this agent never saw open (it was restarted since the login) ended, and
                    // none is known to be open: locked rather than stay unlocked after a logout.
                    AgentLog.info(
                        "a login session opened before this agent started closed, and no other is "
                            + "known: locked all password classes")
                case .endedEarlier:
                    AgentLog.info("a login session closed that had already ended (pid \(caller.pid))")
                default:
                    break
                }
                return .ok(nil)
            }
        } catch let error as SecError {
            return Response(status: error.status, value: nil, message: error.detail)
        } catch {
            return Response(status: SecStatus.internalComponent, value: nil, message: "\(type(of: error))")
        }
    }

    /// Runs an item request in two phases (docs/ACCESS-CONTROL.md §3): the engine answers errSecAuthNeeded
    /// with what it needs, without the items' data and without its mutex held while the user is asked;
    /// the check runs here, and the request is repeated with the check granted in this request's own
    /// session, which no other request sees. The items a repeat needs can differ (the keychain changed
    /// meanwhile): a few rounds, then errSecAuthFailed, like Apple's client (which retries up to 20).
    ///
    /// With an authentication context (`kSecUseAuthenticationContext`, docs/ACCESS-CONTROL.md §7), the
    /// checks it passed within its window are granted to the session before the request runs (so no
    /// prompt, and `kSecUseAuthenticationUIFail` or Skip find the items covered); a check asked for
    /// here is recorded in the context, which then serves later requests of its process.
    ///
    /// `password` is the request's application password (`LAContext.setCredential`); items sealed under
    /// one (docs/ACCESS-CONTROL.md §8) have their keys derived from it in phase two, or from the password
    /// asked for there when the request brought none. It lives as long as the request's session.
    private func withUserChecks<T>(
        _ caller: Caller, context: (handle: [UInt8], owner: ContextOwner)? = nil, password: SecretBytes? = nil,
        clientGone: () -> Bool, _ body: (UserCheckSession?) throws(SecError) -> T
    ) throws(SecError) -> T {
        let evaluated = try context.flatMap { (context) throws(SecError) in
            try contexts.evaluation(context.handle, of: context.owner)
        }
        guard let presence else { return try body(nil) }
        let session = UserCheckSession()
        if let evaluated { session.grantEvaluation(evaluated) }
        if let password { session.setApplicationPassword(password) }
        for round in 0..<3 {
            do {
                return try body(session)
            } catch  where error.status == SecStatus.authNeeded {
                // No check the user would answer in vain: the last round's could not be used.
                guard round < 2 else { break }
                guard let requirement = session.pending else {
                    throw SecError(SecStatus.internalComponent, "a user check was asked for without a requirement")
                }
                let locks = keychain.lockCount()
                let passed =
                    requirement.constraints.isEmpty
                    ? [] : try presence.check(requirement, caller: caller, clientGone: clientGone)
                if (!requirement.boxes.isEmpty || requirement.newBox) && session.applicationPassword == nil {
                    session.setApplicationPassword(
                        try presence.applicationPassword(requirement, caller: caller, clientGone: clientGone))
                }
                session.grant(
                    requirement, passed: passed, applicationKeys: try session.applicationKeys(for: requirement))
                // A round that only asked for an application password passed no check: recording its
                // empty set would forget what the context had been evaluated for.
                if let context, !requirement.constraints.isEmpty {
                    contexts.record(passed, for: context.handle, of: context.owner, lockCount: locks)
                }
                AgentLog.info(
                    "user check passed for pid \(caller.pid) (\(requirement.items.count) protected item(s))")
            }
        }
        throw SecError(SecStatus.authFailed, "the items needing a user check kept changing")
    }

    /// Unlocks with a password; nil on success. A wrong password while the login password is known to
    /// have changed without the keychain (`passwd` run by root) says which password to use instead.
    private func unlockFailure(_ password: SecretBytes) -> SecError? {
        let failure: SecError
        do throws(SecError) {
            try keychain.unlock(password: password)
            return nil
        } catch {
            failure = error
        }
        guard failure.status == SecStatus.authFailed, let outOfStep = keychain.status().passwordOutOfStep else {
            return failure
        }
        return SecError(
            failure.status,
            "\(failure.detail ?? "wrong keychain password"); the keychain may still use "
                + "your previous login password (\(outOfStep)): unlock with that one, then run "
                + "'latchkey passwd' to set it to your login password")
    }

    /// Keys of the `status` reply (docs/PROTOCOL.md).
    func statusValue() -> SecValue {
        let status = keychain.status()
        var classes: [String: SecValue] = [:]
        for (cls, available) in status.available {
            classes[cls.pdmn] = .string(available ? "unlocked" : "locked")
        }
        var value: [String: SecValue] = [
            "keychain": .string(status.location.directory),
            "exists": .bool(status.exists),
            "classes": .dictionary(classes),
        ]
        if let problem = status.problem { value["problem"] = .string(problem) }
        value["deviceBound"] = .bool(status.deviceBound)
        value["deviceFactor"] = .string(status.deviceFactorHeld ? "held" : "missing")
        if let outOfStep = status.passwordOutOfStep { value["passwordOutOfStep"] = .string(outOfStep) }
        value["sessions"] = .int(Int64(sessions.count))
        if let argon2 = status.argon2 {
            value["argon2.t"] = .int(Int64(argon2.timeCost))
            value["argon2.m"] = .int(Int64(argon2.memoryKiB))
            value["argon2.p"] = .int(Int64(argon2.parallelism))
        }
        return .dictionary(value)
    }

    private func argon2Options(_ options: SecDictionary) throws(SecError) -> (Argon2Parameters, Bool) {
        var parameters = Argon2Parameters.default
        func number(_ key: String) throws(SecError) -> UInt32? {
            guard let value = options[key] else { return nil }
            guard case .int(let n) = value, let v = UInt32(exactly: n) else {
                throw .param("option \(key) must be a number")
            }
            return v
        }
        if let t = try number("argon2.t") { parameters.timeCost = t }
        if let m = try number("argon2.m") { parameters.memoryKiB = m }
        if let p = try number("argon2.p") { parameters.parallelism = p }
        let allowWeak = options["argon2.allowWeak"] == .bool(true)
        return (parameters, allowWeak)
    }
}

extension Response {
    static func ok(_ value: SecValue?) -> Response {
        Response(status: SecStatus.success, value: value, message: nil)
    }
}
