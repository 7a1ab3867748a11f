import Foundation
import LatchkeyModel
import LatchkeySecrets
import LatchkeySystem
import LatchkeyWire

/// LocalAuthentication's `LAPolicy`: what `LAContext.evaluatePolicy` asks the user for.
public enum LAPolicy: Int, Sendable {
    /// Biometry only (Apple's `.deviceOwnerAuthenticationWithBiometrics`): the PAM service
    /// `latchkey-biometry` where the agent has one; otherwise it fails as Apple's without biometry.
    case deviceOwnerAuthenticationWithBiometrics = 1
    /// The user's own authentication (Apple's `.deviceOwnerAuthentication`): the PAM service `latchkey`.
    case deviceOwnerAuthentication = 2
}

/// LocalAuthentication's biometry kinds; Linux reports none (`LAContext.biometryType`).
public enum LABiometryType: Int, Sendable {
    case none = 0
    case touchID = 1
    case faceID = 2
    case opticID = 4
}

/// LocalAuthentication's `LACredentialType`.
public enum LACredentialType: Int, Sendable {
    /// The password of items whose access control has `.applicationPassword` (docs/ACCESS-CONTROL.md §8).
    case applicationPassword = 0
    /// A smart card's PIN: a token key used with the context logs in with it instead of asking the user
    /// (docs/TOKENS.md §5).
    case smartCardPIN = -3
}

/// Apple's `LATouchIDAuthenticationMaximumAllowableReuseDuration`: 300 seconds.
public let LATouchIDAuthenticationMaximumAllowableReuseDuration: TimeInterval = 300

/// Apple's `LAErrorDomain`.
public let LAErrorDomain = "com.apple.LocalAuthentication"

/// LocalAuthentication's error, with Apple's codes.
public struct LAError: Error, Hashable, Sendable, CustomNSError {
    /// Apple's `LAError.Code` values.
    public enum Code: Int, Sendable {
        case authenticationFailed = -1
        case userCancel = -2
        case userFallback = -3
        case systemCancel = -4
        case passcodeNotSet = -5
        case biometryNotAvailable = -6
        case biometryNotEnrolled = -7
        case biometryLockout = -8
        case appCancel = -9
        case invalidContext = -10
        case companionNotAvailable = -11
        case notInteractive = -1004
    }

    /// What went wrong.
    public let code: Code

    /// An error with `code`.
    public init(_ code: Code) { self.code = code }

    public static var errorDomain: String { LAErrorDomain }
    public var errorCode: Int { code.rawValue }

    public static var authenticationFailed: Code { .authenticationFailed }
    public static var userCancel: Code { .userCancel }
    public static var userFallback: Code { .userFallback }
    public static var systemCancel: Code { .systemCancel }
    public static var passcodeNotSet: Code { .passcodeNotSet }
    public static var biometryNotAvailable: Code { .biometryNotAvailable }
    public static var biometryNotEnrolled: Code { .biometryNotEnrolled }
    public static var biometryLockout: Code { .biometryLockout }
    public static var appCancel: Code { .appCancel }
    public static var invalidContext: Code { .invalidContext }
    public static var notInteractive: Code { .notInteractive }

    /// The error an agent's status stands for (Apple's mapping, read backwards: secitem-semantics §5.2).
    static func from(status: Int32, policy: LAPolicy) -> LAError {
        switch status {
        case SecStatus.userCanceled: LAError(.userCancel)
        case SecStatus.interactionNotAllowed: LAError(.notInteractive)
        case SecStatus.authFailed where policy == .deviceOwnerAuthenticationWithBiometrics:
            LAError(.biometryNotAvailable)
        case SecStatus.authFailed: LAError(.authenticationFailed)
        default: LAError(.systemCancel)
        }
    }
}

/// Lets `catch LAError.userCancel` match, as Apple's bridged error does.
public func ~= (code: LAError.Code, error: any Error) -> Bool {
    (error as? LAError)?.code == code
}

/// LocalAuthentication's `LAContext` (docs/ACCESS-CONTROL.md §7). The context itself is the agent's:
/// this object holds the handle the agent gave it, which works only for this process. Give it to
/// SecItem calls as `kSecUseAuthenticationContext`: once it is evaluated (by `evaluatePolicy`, or by the
/// first call that needed a user check), it serves every protected item it is given with, without
/// another prompt, until its window ends (`touchIDAuthenticationAllowableReuseDuration` when set, else
/// 30 seconds; never beyond 300), the keychain is locked, or it is invalidated.
public final class LAContext: NSObject, @unchecked Sendable {
    private struct State {
        var reuse: TimeInterval = 0
        var interactionNotAllowed = false
        var localizedReason = ""
        var localizedCancelTitle: String?
        var localizedFallbackTitle: String?
        /// The agent's handle, once the context was made there.
        var handle: [UInt8]?
        /// The reuse duration (milliseconds) the agent knows for the handle.
        var sentReuse: Int64?
        var invalidated = false
        /// The application password (`setCredential`), in wiping storage; sent with each call given
        /// this context, never kept by the agent.
        var applicationPassword: SecretBytes?
        /// The smart-card PIN (`setCredential(_:type: .smartCardPIN)`), sent with each key operation and
        /// token key generation given this context; the agent gives it to the token's C_Login and keeps
        /// only the login.
        var smartCardPIN: SecretBytes?
        /// The token the smart-card PIN first logged in to: it goes to that token only from then on, so a
        /// program that uses keys of two tokens with one context does not hand one card's PIN to the other.
        var smartCardPINToken: String?
    }
    private let state = Locked(State())

    /// A new context, not yet evaluated (the agent makes it on first use).
    public override init() { super.init() }

    deinit {
        // Apple's context is invalidated when it is released; here the agent also frees its slot.
        let handle = state.withLock { $0.invalidated ? nil : $0.handle }
        if let handle { _ = AgentClient.shared.sendToRunningAgent(.invalidateContext(handle: handle)) }
    }

    /// How long an evaluation serves, in seconds (0 to 300; larger values are 300, as Apple clamps).
    /// 0: the agent's default, 30 seconds.
    public var touchIDAuthenticationAllowableReuseDuration: TimeInterval {
        get { state.withLock { $0.reuse } }
        set {
            let clamped =
                newValue.isNaN ? 0 : min(max(newValue, 0), LATouchIDAuthenticationMaximumAllowableReuseDuration)
            state.withLock { $0.reuse = clamped }
        }
    }

    /// No prompt at all: where one would be needed, `evaluatePolicy` fails with `LAError.notInteractive`
    /// and SecItem calls with errSecInteractionNotAllowed (`kSecUseAuthenticationUISkip` still skips).
    public var interactionNotAllowed: Bool {
        get { state.withLock { $0.interactionNotAllowed } }
        set { state.withLock { $0.interactionNotAllowed = newValue } }
    }

    /// The reason SecItem calls given this context show in their prompt, unless the call gives a
    /// `kSecUseOperationPrompt`.
    public var localizedReason: String {
        get { state.withLock { $0.localizedReason } }
        set { state.withLock { $0.localizedReason = newValue } }
    }

    /// Kept for source compatibility; the pinentry prompter shows its own buttons.
    public var localizedCancelTitle: String? {
        get { state.withLock { $0.localizedCancelTitle } }
        set { state.withLock { $0.localizedCancelTitle = newValue } }
    }

    /// Kept for source compatibility; the PAM stack decides what falls back to what.
    public var localizedFallbackTitle: String? {
        get { state.withLock { $0.localizedFallbackTitle } }
        set { state.withLock { $0.localizedFallbackTitle = newValue } }
    }

    /// The biometry the device has: none that this library can name.
    public var biometryType: LABiometryType { .none }

    /// Whether `policy` can be evaluated: the user's own authentication can; biometry alone cannot
    /// (`LAError.biometryNotAvailable`), and an invalidated context nothing (`LAError.invalidContext`).
    /// (Apple's parameter is an `NSErrorPointer`, which Foundation on Linux lacks; `&error` works with both.)
    public func canEvaluatePolicy(_ policy: LAPolicy, error: UnsafeMutablePointer<NSError?>?) -> Bool {
        let failure: LAError?
        if state.withLock({ $0.invalidated }) {
            failure = LAError(.invalidContext)
        } else if policy == .deviceOwnerAuthenticationWithBiometrics {
            failure = LAError(.biometryNotAvailable)
        } else {
            failure = nil
        }
        if let failure { error?.pointee = NSError(domain: LAErrorDomain, code: failure.code.rawValue) }
        return failure == nil
    }

    /// Asks the user (through the agent's PAM stack and prompter) unless this context's evaluation
    /// still serves, then calls `reply` on another thread: true, or false and an `LAError`.
    public func evaluatePolicy(
        _ policy: LAPolicy, localizedReason: String, reply: @escaping @Sendable (Bool, (any Error)?) -> Void
    ) {
        DispatchQueue.global().async { [self] in
            do throws(LAError) {
                try evaluate(policy, reason: localizedReason)
                reply(true, nil)
            } catch {
                reply(false, error)
            }
        }
    }

    /// `evaluatePolicy` for Swift concurrency: true, or throws an `LAError`.
    public func evaluatePolicy(_ policy: LAPolicy, localizedReason: String) async throws -> Bool {
        try await withCheckedThrowingContinuation { continuation in
            evaluatePolicy(policy, localizedReason: localizedReason) { success, error in
                if let error { continuation.resume(throwing: error) } else { continuation.resume(returning: success) }
            }
        }
    }

    /// Sets (or with nil removes) a credential that calls given this context bring:
    /// - `.applicationPassword`, for items with `.applicationPassword`: such an item is sealed under a key
    ///   derived from it, and read only with it (without it the agent asks for it; a wrong one is
    ///   errSecAuthFailed). At most 4096 bytes.
    /// - `.smartCardPIN`, for token keys (a key found with this context, `SecKeyCreateRandomKey` on a
    ///   token with it): the token is logged in with it instead of the user being asked; a wrong one is
    ///   errSecAuthFailed, and nobody is asked then. 1 to 256 bytes.
    /// False for a credential of another size.
    @discardableResult
    public func setCredential(_ credential: Data?, type: LACredentialType) -> Bool {
        let secret: SecretBytes?
        if let credential {
            let limit = type == .applicationPassword ? 4096 : SecKeys.maximumSmartCardPINLength
            guard credential.count <= limit, type == .applicationPassword || !credential.isEmpty else { return false }
            secret = credential.withUnsafeBytes { SecretBytes(copying: $0) }
        } else {
            secret = nil
        }
        state.withLock {
            switch type {
            case .applicationPassword: $0.applicationPassword = secret
            case .smartCardPIN:
                $0.smartCardPIN = secret
                $0.smartCardPINToken = nil
            }
        }
        return true
    }

    /// Whether a credential of `type` is set.
    public func isCredentialSet(_ type: LACredentialType) -> Bool {
        state.withLock {
            switch type {
            case .applicationPassword: $0.applicationPassword != nil
            case .smartCardPIN: $0.smartCardPIN != nil
            }
        }
    }

    /// Ends the context: it never serves again, in the agent or in any call it is given to
    /// (errSecAuthFailed, `LAError.invalidContext`).
    public func invalidate() {
        let handle = state.withLock { state -> [UInt8]? in
            defer {
                state.invalidated = true
                state.handle = nil
                // Its credentials serve no call any more.
                state.applicationPassword = nil
                state.smartCardPIN = nil
            }
            return state.handle
        }
        if let handle { _ = AgentClient.shared.sendToRunningAgent(.invalidateContext(handle: handle)) }
    }

    // MARK: - With the agent

    private func evaluate(_ policy: LAPolicy, reason: String) throws(LAError) {
        let (handle, noUI): ([UInt8], Bool)
        do {
            handle = try requestHandle()
            noUI = interactionNotAllowed
        } catch {
            throw error.status == SecStatus.authFailed ? LAError(.invalidContext) : LAError(.systemCancel)
        }
        var fields: SecDictionary = [
            ContextField.handle: .data(handle), ContextField.policy: .int(Int64(Self.policyNumber(policy))),
            ContextField.reuse: .int(state.withLock { $0.sentReuse ?? 0 }),
        ]
        if !reason.isEmpty { fields[ContextField.reason] = .string(reason) }
        if noUI { fields[ContextField.noUI] = .bool(true) }
        let response = AgentClient.shared.send(.evaluateContext(fields))
        guard response.status == SecStatus.success else { throw LAError.from(status: response.status, policy: policy) }
    }

    /// The handle to send for this context, made (or its reuse duration updated) in the agent first
    /// when needed. errSecAuthFailed once invalidated, as Apple's client answers for such a context.
    func requestHandle() throws(SecError) -> [UInt8] {
        try state.withLock { (state) throws(SecError) -> [UInt8] in
            guard !state.invalidated else { throw SecError(SecStatus.authFailed, "the LAContext was invalidated") }
            let reuse = Int64((state.reuse * 1000).rounded())
            if let handle = state.handle, state.sentReuse == reuse { return handle }
            var fields: SecDictionary = [ContextField.policy: .int(0), ContextField.reuse: .int(reuse)]
            if let handle = state.handle { fields[ContextField.handle] = .data(handle) }
            let response = AgentClient.shared.send(.evaluateContext(fields))
            guard response.status == SecStatus.success else { throw SecError(response.status, response.message) }
            guard case .dictionary(let reply)? = response.value, case .data(let handle)? = reply[ContextField.handle],
                handle.count == SecKeys.authenticationContextLength
            else {
                throw SecError(SecStatus.internalComponent, "the agent answered no context handle")
            }
            state.handle = handle
            state.sentReuse = reuse
            return handle
        }
    }

    /// What a SecItem dictionary that carries this context also says: `interactionNotAllowed` is
    /// `kSecUseAuthenticationUIFail` unless the call asked to skip; `localizedReason` the operation
    /// prompt unless the call gave one.
    func applyUse(to dictionary: inout SecDictionary, withPassword: Bool = true) {
        let (noUI, reason, password) = state.withLock {
            ($0.interactionNotAllowed, $0.localizedReason, $0.applicationPassword)
        }
        // Data like the item's own data: the request's bytes are wiped once sent (docs/PROTOCOL.md §3).
        if withPassword, let password {
            dictionary[SecKeys.useApplicationPassword] = .data(password.withUnsafeBytes { Array($0) })
        }
        if noUI && dictionary[SecKeys.useAuthenticationUI] != .string(SecKeys.useAuthenticationUISkip) {
            dictionary[SecKeys.useAuthenticationUI] = .string(SecKeys.useAuthenticationUIFail)
        }
        if !reason.isEmpty && dictionary[SecKeys.useOperationPrompt] == nil {
            dictionary[SecKeys.useOperationPrompt] = .string(reason)
        }
    }

    /// Puts the smart-card PIN, when set, into a key operation's or a token key generation's request
    /// (`u_CardPIN`) for the token `tokenID`, as a copy of its own that the caller wipes once the request
    /// is sent. Not for another token than the one it already logged in to.
    func applySmartCardPIN(to dictionary: inout SecDictionary, tokenID: String) {
        guard
            let pin = state.withLock({ state -> SecretBytes? in
                guard state.smartCardPINToken == nil || state.smartCardPINToken == tokenID else { return nil }
                return state.smartCardPIN
            })
        else { return }
        dictionary[SecKeys.useSmartCardPIN] = .data(pin.withUnsafeBytes { Array($0) })
    }

    /// A call that carried the smart-card PIN to `tokenID` succeeded: the PIN is that token's from now on.
    func smartCardPINServed(_ tokenID: String) {
        state.withLock { if $0.smartCardPIN != nil && $0.smartCardPINToken == nil { $0.smartCardPINToken = tokenID } }
    }

    private static func policyNumber(_ policy: LAPolicy) -> Int {
        policy == .deviceOwnerAuthentication ? 1 : 2
    }
}
