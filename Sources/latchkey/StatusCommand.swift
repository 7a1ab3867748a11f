import ArgumentParser
import Latchkey

/// `latchkey status`: where the keychain is and which classes are unlocked.
struct StatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show the keychain's location, parameters and lock state.",
        discussion: """
            Prints the keychain directory, whether the keychain exists, any problem the agent found \
            with it (a damaged keybag, for example), the Argon2id parameters of its password, and \
            for every accessibility class whether it is locked or unlocked. Starts the agent if it \
            is not running.

            Example:
              latchkey status
            """)

    func run() throws {
        let status: KeychainControl.Status
        do throws(KeychainControl.Failure) {
            status = try KeychainControl.status()
        } catch {
            throw controlFailure("KeychainControl.status", error)
        }
        print(Self.render(status), terminator: "")
    }

    /// The report, one fact per line, then the class table.
    static func render(_ status: KeychainControl.Status) -> String {
        var lines = [
            "keychain: \(status.directory)",
            "exists: \(status.exists ? "yes" : "no")",
        ]
        if let problem = status.problem { lines.append("problem: \(problem)") }
        if let argon2 = status.argon2 {
            let mebibytes = argon2.m % 1024 == 0 ? " (\(argon2.m / 1024) MiB)" : ""
            lines.append("argon2id: memory \(argon2.m) KiB\(mebibytes), time \(argon2.t), parallelism \(argon2.p)")
        }
        if status.exists {
            lines.append(
                "device binding: "
                    + (status.deviceBound
                        ? "bound to this machine (ThisDeviceOnly classes need a login through pam_latchkey)"
                        : "not bound (ThisDeviceOnly classes are protected by the password only)"))
            if status.deviceBound && !status.deviceFactorHeld {
                lines.append("device factor: missing; log in through pam_latchkey to open the ThisDeviceOnly classes")
            }
            if let outOfStep = status.passwordOutOfStep {
                lines.append("login password: OUT OF STEP: \(outOfStep)")
                lines.append("  run 'latchkey passwd' to set the keychain password to the login password")
            }
            if status.sessions > 0 { lines.append("login sessions: \(status.sessions)") }
        }
        lines.append("")
        let names = status.classes.map { KeychainControl.displayName(pdmn: $0.pdmn) }
        let width = max(names.map(\.count).max() ?? 0, "CLASS".count)
        func padded(_ text: String, _ width: Int) -> String {
            text + String(repeating: " ", count: max(0, width - text.count))
        }
        lines.append(padded("CLASS", width) + "  " + padded("PDMN", 4) + "  STATE")
        for (state, name) in zip(status.classes, names) {
            lines.append(
                padded(name, width) + "  " + padded(state.pdmn, 4) + "  " + (state.unlocked ? "unlocked" : "locked"))
        }
        return lines.joined(separator: "\n") + "\n"
    }
}
