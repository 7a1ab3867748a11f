import CPAM
import LatchkeySecretService
import LatchkeySecrets

#if canImport(Glibc)
    import Glibc
#endif

/// One PAM transaction for the agent's own user in the service `latchkey` (docs/ACCESS-CONTROL.md §4):
/// `pam_authenticate` with a conversation whose questions go to the pinentry prompter. Blocks; runs on
/// the user-check thread only (`UserPresence`), never with the keychain's mutex held.
enum PAMUserCheck {
    enum Outcome: Equatable {
        case passed
        /// The stack refused (a wrong password, pam_deny, no such user).
        case failed
        /// The user cancelled, or nobody answered in time.
        case cancelled
        /// The prompter could not be run: nobody could be asked.
        case noInteraction
    }

    /// At most this many questions in one transaction: a stack that keeps asking is refused.
    static let maximumQuestions = 8

    /// Runs the transaction. `directory`: the directory of service files (nil: /etc/pam.d).
    static func run(service: String, directory: String?, user: String, conversation: PinentryConversation)
        -> Outcome
    {
        let box = ConversationBox(conversation)
        let appdata = Unmanaged.passRetained(box)
        defer { appdata.release() }
        var conv = pam_conv(conv: converse, appdata_ptr: appdata.toOpaque())
        var handle: OpaquePointer?
        let started = pam_start_confdir(service, user, &conv, directory, &handle)
        guard started == PAM_SUCCESS, let handle else { return .failed }
        let status = pam_authenticate(handle, 0)
        pam_end(handle, status)
        if box.cancelled { return .cancelled }
        if status == PAM_SUCCESS { return .passed }
        if box.noInteraction { return .noInteraction }
        return .failed
    }

    final class ConversationBox {
        let conversation: PinentryConversation
        var questions = 0
        var cancelled = false
        var noInteraction = false
        init(_ conversation: PinentryConversation) { self.conversation = conversation }
    }

    /// PAM's conversation function: the answers are malloc'd for PAM, which wipes and frees them.
    private static let converse:
        @convention(c) (
            Int32, UnsafeMutablePointer<UnsafePointer<pam_message>?>?,
            UnsafeMutablePointer<UnsafeMutablePointer<pam_response>?>?, UnsafeMutableRawPointer?
        ) -> Int32 = { count, messages, responses, appdata in
            guard count > 0, count <= 32, let messages, let responses, let appdata else { return PAM_CONV_ERR }
            let box = Unmanaged<ConversationBox>.fromOpaque(appdata).takeUnretainedValue()
            guard
                let replies = calloc(Int(count), MemoryLayout<pam_response>.stride)?
                    .bindMemory(to: pam_response.self, capacity: Int(count))
            else { return PAM_BUF_ERR }
            func fail() -> Int32 {
                for k in 0..<Int(count) {
                    if let text = replies[k].resp {
                        memset(text, 0, strlen(text))
                        free(text)
                    }
                }
                free(replies)
                return PAM_CONV_ERR
            }
            for k in 0..<Int(count) {
                // Linux-PAM passes an array of pointers (messages[k]), as the header says.
                guard let message = messages[k] else { return fail() }
                let text = message.pointee.msg.map { String(cString: $0) } ?? ""
                switch message.pointee.msg_style {
                case PAM_PROMPT_ECHO_OFF, PAM_PROMPT_ECHO_ON:
                    box.questions += 1
                    guard box.questions <= maximumQuestions, !box.cancelled else { return fail() }
                    switch box.conversation.ask(text) {
                    case .answer(let secret):
                        let copy = secret.withUnsafeBytes { raw -> UnsafeMutablePointer<CChar>? in
                            guard let out = malloc(raw.count + 1)?.bindMemory(to: CChar.self, capacity: raw.count + 1)
                            else { return nil }
                            if raw.count > 0 { memcpy(out, raw.baseAddress!, raw.count) }
                            out[raw.count] = 0
                            return out
                        }
                        guard let copy else { return fail() }
                        replies[k].resp = copy
                    case .cancelled, .timedOut:
                        box.cancelled = true
                        return fail()
                    case .failed(let why):
                        AgentLog.warning("user check: the prompter could not ask: \(why)")
                        box.noInteraction = true
                        return fail()
                    }
                case PAM_ERROR_MSG, PAM_TEXT_INFO:
                    box.conversation.note(text)
                default:
                    return fail()
                }
            }
            responses.pointee = replies
            return PAM_SUCCESS
        }
}
