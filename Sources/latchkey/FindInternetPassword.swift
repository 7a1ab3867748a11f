import ArgumentParser
import Latchkey

/// `latchkey find-internet-password`: SecItemCopyMatching on internet passwords.
struct FindInternetPassword: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "find-internet-password",
        abstract: "Find an internet password item and print it.",
        discussion: """
            Prints the first item that matches all the given attributes (any item, if none is \
            given): its class and its attributes, one per line, as "name"<type>=value. With -g the \
            password follows on a 'password:' line; with -w only the password is printed, followed \
            by a newline, for scripts.

            Exits with status 44 if no item matches. Reading an item of a locked class fails with \
            errSecInteractionNotAllowed (-25308): run 'latchkey unlock'.

            Examples:
              latchkey find-internet-password -s mail.example.com -a alice
              latchkey find-internet-password -s git.example.com -r htps -w
            """)

    @OptionGroup(title: "Match")
    var item: InternetOptions

    @Option(name: .customShort("l"), help: ArgumentHelp("Match the label (kSecAttrLabel).", valueName: "label"))
    var label: String?

    @Flag(name: .customShort("w"), help: "Print only the password, followed by a newline.")
    var passwordOnly = false

    @Flag(name: .customShort("g"), help: "Print the password after the attributes.")
    var withPassword = false

    func validate() throws {
        if passwordOnly && withPassword { throw ValidationError("-w and -g cannot be combined") }
    }

    func run() throws {
        var filters = item.filters
        if let label { filters[kSecAttrLabel as String] = label }
        try ItemQuery.find(kSecClassInternetPassword, filters, passwordOnly: passwordOnly, withPassword: withPassword)
    }
}
