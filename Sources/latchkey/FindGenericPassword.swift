import ArgumentParser
import Latchkey

/// `latchkey find-generic-password`: SecItemCopyMatching on generic passwords.
struct FindGenericPassword: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "find-generic-password",
        abstract: "Find a generic password item and print it.",
        discussion: """
            Prints the first item that matches all the given attributes (any item, if none is \
            given): its class and its attributes, one per line, as "name"<type>=value. With -g the \
            password follows on a 'password:' line; with -w only the password is printed, followed \
            by a newline, for scripts.

            Exits with status 44 if no item matches. Reading an item of a locked class fails with \
            errSecInteractionNotAllowed (-25308): run 'latchkey unlock'.

            Examples:
              latchkey find-generic-password -s example.com -a alice
              TOKEN=$(latchkey find-generic-password -s api.example.com -a ci -w)
            """)

    @Option(name: .customShort("s"), help: ArgumentHelp("Match the service (kSecAttrService).", valueName: "service"))
    var service: String?

    @Option(name: .customShort("a"), help: ArgumentHelp("Match the account (kSecAttrAccount).", valueName: "account"))
    var account: String?

    @Option(name: .customShort("l"), help: ArgumentHelp("Match the label (kSecAttrLabel).", valueName: "label"))
    var label: String?

    @Option(name: .customShort("G"), help: ArgumentHelp("Match the generic attribute (kSecAttrGeneric).", valueName: "value"))
    var generic: String?

    @Flag(name: .customShort("w"), help: "Print only the password, followed by a newline.")
    var passwordOnly = false

    @Flag(name: .customShort("g"), help: "Print the password after the attributes.")
    var withPassword = false

    func validate() throws {
        if passwordOnly && withPassword { throw ValidationError("-w and -g cannot be combined") }
    }

    func run() throws {
        var filters: [String: Any] = [:]
        if let service { filters[kSecAttrService as String] = service }
        if let account { filters[kSecAttrAccount as String] = account }
        if let label { filters[kSecAttrLabel as String] = label }
        if let generic { filters[kSecAttrGeneric as String] = generic }
        try ItemQuery.find(kSecClassGenericPassword, filters, passwordOnly: passwordOnly, withPassword: withPassword)
    }
}
