import LatchkeySecrets

#if canImport(Glibc)
    import Glibc
#endif

/// A conversation with the user through the same pinentry prompter as the Secret Service's unlock
/// prompt (`PinentryPrompter`): the agent's user checks put a PAM conversation's questions to it
/// (docs/ACCESS-CONTROL.md §4). The program is started at the first question and kept for the rest of
/// the conversation; each answer has the prompter's timeout.
package final class PinentryConversation {
    /// How one question ended.
    package enum Answer {
        case answer(SecretBytes)
        /// The user cancelled or closed the prompt.
        case cancelled
        /// Nobody answered within the timeout.
        case timedOut
        /// The program could not be run or misbehaved.
        case failed(String)
    }

    private let prompter: PinentryPrompter
    private let description: String
    private let cancellation = PromptCancellation()
    private var channel: PinentryChannel?
    /// Informational and error lines of the conversation, shown with the next question.
    private var notes: [String] = []

    /// `description` is the prompt's text (what asks, and why); the busAddress of the prompter's
    /// environment is the agent's own.
    package init(prompter: PinentryPrompter, description: String) {
        self.prompter = prompter
        self.description = description
    }

    /// Shows `text` with the next question (PAM's PAM_TEXT_INFO and PAM_ERROR_MSG).
    package func note(_ text: String) {
        if notes.count < 8 { notes.append(String(text.prefix(300))) }
    }

    /// Asks `question` (PAM's prompt, "Password: " for pam_unix) with the answer hidden.
    package func ask(_ question: String) -> Answer {
        do {
            let channel = try open()
            if !notes.isEmpty {
                try channel.command("SETERROR " + Assuan.escape(notes.joined(separator: "\n"), maximumBytes: 900))
                notes.removeAll()
            }
            let label = question.trimmingCharacters(in: " ")
            try channel.command(
                "SETPROMPT " + Assuan.escape(label.isEmpty ? "Password:" : String(label.prefix(200)), maximumBytes: 900)
            )
            guard let answer = try channel.getPin() else { return .cancelled }
            return .answer(answer)
        } catch {
            return error.timedOut ? .timedOut : .failed(error.message)
        }
    }

    /// Asks the user to confirm the description with a button labelled `ok` (pinentry's CONFIRM):
    /// `.answer` with no bytes when confirmed.
    package func confirm(ok: String) -> Answer {
        do {
            let channel = try open()
            try channel.command("SETOK " + Assuan.escape(String(ok.prefix(60)), maximumBytes: 200))
            return try channel.confirm() ? .answer(SecretBytes(count: 0)) : .cancelled
        } catch {
            return error.timedOut ? .timedOut : .failed(error.message)
        }
    }

    /// Dismisses the conversation from another thread (its client went away): stops the prompter now, or
    /// as soon as it starts, so the question waiting on it, and those after it, fail at once.
    package func cancel() {
        cancellation.cancel()
    }

    /// Ends the conversation: stops the prompter (and reaps it).
    package func close() {
        channel?.close()
        channel = nil
    }

    private func open() throws(PrompterError) -> PinentryChannel {
        if let channel { return channel }
        let made = try PinentryChannel(
            command: prompter.command, timeoutSeconds: prompter.timeoutSeconds, cancellation: cancellation,
            environment: PrompterEnvironment.current(busAddress: nil))
        channel = made
        do {
            try made.expectOK()  // the greeting
            try made.command("SETTITLE latchkey")
            try made.command("SETDESC " + Assuan.escape(description, maximumBytes: 900))
        } catch {
            close()
            throw error
        }
        return made
    }
}

extension String {
    fileprivate func trimmingCharacters(in character: Character) -> String {
        var text = Substring(self)
        while text.first == character { text.removeFirst() }
        while text.last == character { text.removeLast() }
        return String(text)
    }
}
