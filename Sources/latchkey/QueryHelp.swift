import ArgumentParser

/// What the find and delete verbs of both item classes say and print the same way.
enum QueryHelp {
    /// The discussion of `find-…-password`, followed by the verb's own examples.
    static func find(examples: [String]) -> String {
        """
        Prints the first item that matches all the given attributes (any item, if none is \
        given): its class and its attributes, one per line, as "name"<type>=value. With -g the \
        password follows on a 'password:' line; with -w only the password is printed, followed \
        by a newline, for scripts.

        Exits with status 44 if no item matches. Reading an item of a locked class fails with \
        errSecInteractionNotAllowed (-25308): run 'latchkey unlock'.

        Examples:
        \(examples.map { "  " + $0 }.joined(separator: "\n"))
        """
    }

    /// The discussion of `delete-…-password`, followed by the verb's own examples.
    static func delete(examples: [String]) -> String {
        """
        Deletes every item that matches all the given attributes, like SecItemDelete, and \
        prints how many were deleted when they can be counted (not while their class is \
        locked). Deleting works after 'latchkey lock' but not after 'latchkey lock --all'. At \
        least one attribute is required, so that a bare command cannot empty the keychain. \
        Exits with status 44 if no item matches.

        Examples:
        \(examples.map { "  " + $0 }.joined(separator: "\n"))
        """
    }
}

/// `-w` / `-g`: how a found item's password is printed.
struct PasswordOutputOptions: ParsableArguments {
    @Flag(name: .customShort("w"), help: "Print only the password, followed by a newline.")
    var passwordOnly = false

    @Flag(name: .customShort("g"), help: "Print the password after the attributes.")
    var withPassword = false

    func validate() throws {
        if passwordOnly && withPassword { throw ValidationError("-w and -g cannot be combined") }
    }
}
