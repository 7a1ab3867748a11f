import LatchkeyApplications
import LatchkeyEngine
import LatchkeyModel
import LatchkeySecrets
import LatchkeyWire

/// `LAContext` requests and the contexts item requests carry (docs/ACCESS-CONTROL.md §7).
extension AgentService {
    /// Whether the process `owner` names still runs.
    static func isRunning(_ owner: ContextOwner) -> Bool {
        ProcessInspection.isRunning(pid: owner.pid, started: owner.started)
    }

    /// The context a SecItem dictionary carries (`u_AuthCtx`), bound to the process that sent it.
    /// errSecAuthFailed when the process is not known well enough to own one; errSecParam for a value
    /// that is no handle (the engine's parser says the same).
    func context(in dictionary: SecDictionary, of process: ContextOwner?) throws(SecError)
        -> (handle: [UInt8], owner: ContextOwner)?
    {
        guard let value = dictionary[SecKeys.useAuthenticationContext] else { return nil }
        guard case .data(let handle) = value, handle.count == SecKeys.authenticationContextLength else {
            throw .param("kSecUseAuthenticationContext must be an LAContext")
        }
        guard let process else { throw Self.unidentified }
        return (handle, process)
    }

    /// The application password a SecItem dictionary carries (`u_AppPwd`, from `LAContext.setCredential`),
    /// copied into wiping storage; the request's own copy is wiped with its other data once answered.
    func applicationPassword(in dictionary: SecDictionary) throws(SecError) -> SecretBytes? {
        guard let value = dictionary[SecKeys.useApplicationPassword] else { return nil }
        guard case .data(let bytes) = value, bytes.count <= ApplicationPassword.maximumPasswordLength else {
            throw .param("the application password must be data of at most 4096 bytes")
        }
        return SecretBytes(copying: bytes)
    }

    /// Makes, updates or evaluates a context of `process` (opcode 0x16); answers its handle. An
    /// evaluation that still serves answers at once, without asking again, as an evaluated
    /// `LAContext` does.
    func evaluateContext(
        _ fields: SecDictionary, caller: Caller, process: ContextOwner?, clientGone: () -> Bool = { false }
    ) throws(SecError)
        -> SecValue
    {
        guard let process else { throw Self.unidentified }
        guard case .int(let milliseconds)? = fields[ContextField.reuse], (0...300_000).contains(milliseconds) else {
            throw .param("the reuse duration must be 0 to 300 000 milliseconds")
        }
        let reuse = Duration.milliseconds(milliseconds)
        let constraint: AccessConstraint?
        switch fields[ContextField.policy] {
        case .int(0)?: constraint = nil
        case .int(1)?: constraint = .check(.userPresence)
        case .int(2)?: constraint = .check(.biometryAny)
        default: throw .param("unknown authentication policy")
        }
        var reason: String?
        if let value = fields[ContextField.reason] {
            guard case .string(let text) = value else { throw .param("the reason must be a string") }
            reason = text
        }
        let handle: [UInt8]
        switch fields[ContextField.handle] {
        case nil:
            handle = try contexts.make(for: process, reuse: reuse)
        case .data(let given)? where given.count == SecKeys.authenticationContextLength:
            try contexts.update(given, of: process, reuse: reuse)
            handle = given
        default:
            throw .param("a context handle is \(SecKeys.authenticationContextLength) bytes")
        }
        if let constraint, try contexts.evaluation(handle, of: process).map(constraint.isSatisfied) != true {
            guard fields[ContextField.noUI] != .bool(true) else {
                throw SecError(
                    SecStatus.interactionNotAllowed, "the context may not ask the user (interactionNotAllowed)")
            }
            guard let presence else {
                throw SecError(SecStatus.interactionNotAllowed, "this agent has nobody to ask (no prompter)")
            }
            let locks = keychain.lockCount()
            let passed = try presence.check(
                .evaluation(constraint, prompt: reason), caller: caller, clientGone: clientGone)
            contexts.record(passed, for: handle, of: process, lockCount: locks)
            AgentLog.info("authentication context evaluated for pid \(caller.pid)")
        }
        return .dictionary([ContextField.handle: .data(handle)])
    }

    private static var unidentified: SecError {
        SecError(
            SecStatus.authFailed,
            "authentication contexts need a caller the agent identified (pid and start time) on its own connection")
    }
}
