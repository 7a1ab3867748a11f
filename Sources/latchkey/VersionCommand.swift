import ArgumentParser

/// `latchkey version`.
struct VersionCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "version",
        abstract: "Print the version of latchkey.",
        discussion: """
            Prints the command's version; 'latchkeyd --version' prints the agent's and its protocol \
            version.

            Example:
              latchkey version
            """)

    func run() {
        print("latchkey \(LatchkeyCLI.version)")
    }
}
