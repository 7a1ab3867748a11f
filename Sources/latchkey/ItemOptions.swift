import ArgumentParser
import Foundation
import Latchkey

/// Where an added item's password comes from: `-w VALUE`, a trailing `-w` / `--prompt`, or
/// `--password-stdin`. None of them: the item gets an empty password, as with macOS `security`.
struct PasswordSourceOptions: ParsableArguments {
    @Option(
        name: .customShort("w"), parsing: .unconditional,
        help: ArgumentHelp(
            "The item's password, given on the command line.",
            discussion: """
                Anything on a command line can be read by other users with ps(1) and may end \
                up in your shell history: prefer --password-stdin, or put -w last with no \
                value to be prompted.
                """,
            valueName: "password"))
    var password: String?

    @Flag(
        name: .customLong("prompt"),
        help: "Prompt for the password on the terminal, twice (what a trailing -w does).")
    var prompt = false

    @Flag(
        name: .customLong("password-stdin"),
        help: "Read the password from the first line of standard input (without its newline).")
    var passwordStdin = false

    func validate() throws {
        let sources = [password != nil, prompt, passwordStdin].filter { $0 }.count
        guard sources <= 1 else {
            throw ValidationError("give the password only one way: -w VALUE, -w last (prompt), or --password-stdin")
        }
    }

    /// The password for kSecValueData, or nil when none was given. The caller wipes it.
    func read() throws(InputFailure) -> NSMutableData? {
        if let password { return NSMutableData(data: Data(password.utf8)) }
        if passwordStdin { return try PasswordInput.standardInputLine().dataCopy() }
        if prompt {
            return try PasswordInput.confirmed("password data for new item: ", "retype password for new item: ")
                .dataCopy()
        }
        return nil
    }
}

/// Attributes and behaviour shared by `add-generic-password` and `add-internet-password`.
struct ItemAttributeOptions: ParsableArguments {
    @Option(name: .customShort("l"), help: ArgumentHelp("Label (kSecAttrLabel).", valueName: "label"))
    var label: String?

    @Option(name: .customShort("j"), help: ArgumentHelp("Comment (kSecAttrComment).", valueName: "comment"))
    var comment: String?

    @Option(
        name: .customShort("D"), help: ArgumentHelp("Kind, a description (kSecAttrDescription).", valueName: "kind"))
    var kind: String?

    @Flag(
        name: .customShort("U"),
        help: "Update the item if it already exists, instead of failing with errSecDuplicateItem.")
    var update = false

    @Option(name: .customLong("accessible"), help: Accessibility.help)
    var accessible: Accessibility?

    @OptionGroup
    var groups: AccessGroupOptions

    @Flag(name: .customLong("sync"), help: "Mark the item synchronizable (kSecAttrSynchronizable).")
    var synchronizable = false

    @Option(name: .customLong("access-control"), help: AccessControlWords.help)
    var accessControl: String?

    @OptionGroup
    var interaction: InteractionOptions

    func validate() throws {
        guard let accessControl else { return }
        _ = try AccessControlWords.parse(accessControl)
        if synchronizable {
            throw ValidationError("--access-control and --sync exclude each other (Apple's errSecParam)")
        }
    }

    /// `changes` with the item's access control (which needs the flags made into an object first).
    func changesWithAccessControl() throws -> [String: Any] {
        var attributes = changes
        if let accessControl {
            let flags = try AccessControlWords.parse(accessControl)
            attributes[kSecAttrAccessControl as String] = try AccessControlWords.make(
                flags, protection: accessible?.pdmn ?? (kSecAttrAccessibleWhenUnlocked as String))
        }
        return attributes
    }

    /// The attributes a new item gets, which are also what `-U` changes on an existing one.
    var changes: [String: Any] {
        var attributes: [String: Any] = [:]
        if let label { attributes[kSecAttrLabel as String] = label }
        if let comment { attributes[kSecAttrComment as String] = comment }
        if let kind { attributes[kSecAttrDescription as String] = kind }
        if let accessible { attributes[kSecAttrAccessible as String] = accessible.pdmn }
        return attributes
    }

    /// The attributes of the primary key these options set (both classes): the group and the
    /// synchronizable flag.
    var keyAttributes: [String: Any] {
        var attributes: [String: Any] = [
            kSecAttrSynchronizable as String: synchronizable ? kCFBooleanTrue! : kCFBooleanFalse!
        ]
        if let accessGroup = groups.accessGroup { attributes[kSecAttrAccessGroup as String] = accessGroup }
        return attributes
    }
}

/// Adds an item, or with `-U` updates the existing item with the same primary key.
///
/// - Parameters:
///   - primaryKey: class and primary-key attributes, the exact query that finds the item `-U` updates.
///   - attributes: other attributes of the new item (label, comment, ...), also applied by `-U`.
///   - secret: kSecValueData, or nil to leave an updated item's password unchanged (new items get an
///     empty one, as Apple does).
func addOrUpdate(primaryKey: [String: Any], attributes: [String: Any], secret: NSMutableData?, update: Bool)
    throws(ExitCode)
{
    var item = primaryKey.merging(attributes) { _, new in new }
    item[kSecValueData as String] = secret ?? NSMutableData()
    let status = SecItemAdd(Interaction.applied(to: item) as CFDictionary, nil)
    if status == errSecSuccess { return }
    guard status == errSecDuplicateItem, update else { throw secItemFailure("SecItemAdd", status) }

    var changes = attributes
    if let secret { changes[kSecValueData as String] = secret }
    // An update with nothing to change is a successful no-op for the user ("make sure it exists").
    guard !changes.isEmpty else { return }
    let updateStatus = SecItemUpdate(Interaction.applied(to: primaryKey) as CFDictionary, changes as CFDictionary)
    guard updateStatus == errSecSuccess else { throw secItemFailure("SecItemUpdate", updateStatus) }
}
