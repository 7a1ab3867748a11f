/// The keys of the `evaluateContext` request's dictionary (opcode 0x16, docs/PROTOCOL.md).
package enum ContextField {
    /// Data: the handle of the caller's context to evaluate or update; absent: make a new one.
    package static let handle = "handle"
    /// Int: 0 none (make or update only), 1 `.deviceOwnerAuthentication`,
    /// 2 `.deviceOwnerAuthenticationWithBiometrics`.
    package static let policy = "policy"
    /// String: `localizedReason`, shown in the prompt.
    package static let reason = "reason"
    /// Int: `touchIDAuthenticationAllowableReuseDuration` in milliseconds (0 to 300 000).
    package static let reuse = "reuse"
    /// Bool: `interactionNotAllowed`; an evaluation that would have to ask is errSecInteractionNotAllowed.
    package static let noUI = "noUI"
}
