import ArgumentParser
import Latchkey

/// `latchkey lock`: drops class keys from the agent's memory.
struct LockCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lock",
        abstract: "Lock the keychain.",
        discussion: """
            Without --all, locks the WhenUnlocked family (when-unlocked, \
            when-unlocked-this-device-only, when-passcode-set-this-device-only), as a screen lock \
            does: items of the after-first-unlock classes stay readable, so background services keep \
            working. With --all, locks every password-protected class, as logging out does. The \
            always classes have no password and are never locked. Items can still be deleted \
            after a plain 'latchkey lock', not after 'latchkey lock --all'.

            Examples:
              latchkey lock
              latchkey lock --all
            """)

    @Flag(name: .customLong("all"), help: "Also lock the after-first-unlock classes (like logging out).")
    var all = false

    func run() throws {
        do throws(KeychainControl.Failure) {
            try KeychainControl.lock(all: all)
        } catch {
            throw controlFailure("KeychainControl.lock", error)
        }
    }
}
