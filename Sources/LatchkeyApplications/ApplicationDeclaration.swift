/// What one application file declares, checked for form only (docs/APPLICATIONS.md "The file"): the
/// file system is consulted later, by `ApplicationLoader`, for the executable's ownership.
///
///     [Application]
///     Id=org.example.Mail
///     Executable=/usr/bin/example-mail
///     AccessGroups=org.example.Mail;org.example.shared
package struct ApplicationDeclaration: Sendable, Equatable {
    /// How the kernel will recognize the application: exactly one per file.
    package enum Identifier: Sendable, Hashable {
        /// `Executable=`: a host program, by its file (the device and inode are recorded at load).
        case executable(String)
        /// `FlatpakId=`: a Flatpak application, by the id its sandbox reports.
        case flatpak(String)
        /// `SnapName=`: a snap, by the name in its AppArmor label.
        case snap(String)
    }

    /// The one group every application file has.
    package static let groupName = "Application"
    /// The keys this version reads; keys starting with `X-` are extensions and are ignored.
    package static let knownKeys: Set<String> = [
        "Id", "Executable", "FlatpakId", "SnapName", "AccessGroups", "Privileges",
    ]

    /// `Id=`: unique among the files in force.
    package var id: String
    package var identifier: Identifier
    /// `AccessGroups=`, in order: the first is where the application's new items go.
    package var accessGroups: [String]
    /// `Privileges=`: what the application may do besides using its groups (none without the key).
    package var privileges: Set<ApplicationPrivilege>

    package init(
        id: String, identifier: Identifier, accessGroups: [String], privileges: Set<ApplicationPrivilege> = []
    ) {
        self.id = id
        self.identifier = identifier
        self.accessGroups = accessGroups
        self.privileges = privileges
    }

    /// The declaration in `file`. Refuses unknown groups and keys (other than `X-` extensions) rather
    /// than skipping them: a misspelt key in a file that grants access should be reported, not
    /// silently lose its effect.
    package static func parse(_ file: KeyFile) throws(ApplicationFileError) -> ApplicationDeclaration {
        if let other = file.groups.first(where: { $0.name != groupName && !$0.name.hasPrefix("X-") }) {
            throw .unknownGroup(other.name)
        }
        guard let group = file.group(groupName) else { throw .missingGroup }
        if let unknown = group.keys.first(where: { !knownKeys.contains($0) && !$0.hasPrefix("X-") }) {
            throw .unknownKey(unknown)
        }
        guard let id = try string("Id", in: group) else { throw .missingKey("Id") }
        guard ApplicationNames.isValidApplicationID(id) else { throw .invalidID(id) }
        let identifier = try identifier(in: group)
        guard let groups = try list("AccessGroups", in: group) else { throw .missingKey("AccessGroups") }
        guard !groups.isEmpty else { throw .noAccessGroups }
        guard groups.count <= ApplicationNames.maximumGroups else {
            throw .tooManyAccessGroups(limit: ApplicationNames.maximumGroups)
        }
        if let bad = groups.first(where: { !ApplicationNames.isValidAccessGroup($0) }) {
            throw .invalidAccessGroup(bad)
        }
        // As bytes: the store tells groups apart by their bytes (two spellings of "café" are two groups).
        if let repeated = groups.enumerated().first(where: { entry in
            groups[..<entry.offset].contains { $0.utf8.elementsEqual(entry.element.utf8) }
        }) {
            throw .repeatedAccessGroup(repeated.element)
        }
        let privileges = try privileges(in: group, identifier: identifier)
        return ApplicationDeclaration(id: id, identifier: identifier, accessGroups: groups, privileges: privileges)
    }

    /// `Privileges=`: known names only, each once, and only for a host program (`Executable=`). A
    /// privilege is a program's, vouched for by its root-owned file: a sandbox identity (a Flatpak id, a
    /// snap name) is one any user can install an application under, so it can hold none.
    private static func privileges(
        in group: KeyFile.Group, identifier: Identifier
    ) throws(ApplicationFileError) -> Set<ApplicationPrivilege> {
        guard let names = try list("Privileges", in: group) else { return [] }
        var privileges: Set<ApplicationPrivilege> = []
        for name in names {
            guard let privilege = ApplicationPrivilege(rawValue: name) else { throw .unknownPrivilege(name) }
            guard privileges.insert(privilege).inserted else { throw .repeatedPrivilege(name) }
        }
        if !privileges.isEmpty {
            guard case .executable = identifier else { throw .privilegesNeedExecutable }
        }
        return privileges
    }

    private static func string(_ key: String, in group: KeyFile.Group) throws(ApplicationFileError) -> String? {
        do {
            return try group.string(key)
        } catch {
            throw .value(error)
        }
    }

    private static func list(_ key: String, in group: KeyFile.Group) throws(ApplicationFileError) -> [String]? {
        do {
            return try group.list(key)
        } catch {
            throw .value(error)
        }
    }

    /// Exactly one of `Executable=`, `FlatpakId=` and `SnapName=`, in its valid form.
    private static func identifier(in group: KeyFile.Group) throws(ApplicationFileError) -> Identifier {
        let present = ["Executable", "FlatpakId", "SnapName"].filter { group.entries[$0] != nil }
        guard present.count == 1 else {
            throw present.isEmpty ? .noIdentifier : .severalIdentifiers(present)
        }
        let value = try string(present[0], in: group) ?? ""
        switch present[0] {
        case "Executable":
            guard ApplicationNames.isValidExecutablePath(value) else { throw .invalidExecutable(value) }
            return .executable(value)
        case "FlatpakId":
            guard ApplicationNames.isValidFlatpakID(value) else { throw .invalidFlatpakID(value) }
            return .flatpak(value)
        default:
            guard ApplicationNames.isValidSnapName(value) else { throw .invalidSnapName(value) }
            return .snap(value)
        }
    }
}

/// Why an application file's content was refused (its syntax was fine).
package enum ApplicationFileError: Error, Sendable, Equatable, CustomStringConvertible {
    case missingGroup
    case unknownGroup(String)
    case unknownKey(String)
    case missingKey(String)
    case invalidID(String)
    case noIdentifier
    case severalIdentifiers([String])
    case invalidExecutable(String)
    case invalidFlatpakID(String)
    case invalidSnapName(String)
    case noAccessGroups
    case tooManyAccessGroups(limit: Int)
    case invalidAccessGroup(String)
    case repeatedAccessGroup(String)
    /// `Privileges=` names a privilege this version does not know.
    case unknownPrivilege(String)
    case repeatedPrivilege(String)
    /// `Privileges=` in a file that names a Flatpak or a snap rather than an executable.
    case privilegesNeedExecutable
    /// A value's escapes were malformed.
    case value(KeyFileError)

    package var description: String {
        switch self {
        case .missingGroup: "no [Application] group"
        case .unknownGroup(let name): "an unknown group [\(name)] (extensions start with X-)"
        case .unknownKey(let key): "an unknown key \(key)= in [Application] (extensions start with X-)"
        case .missingKey(let key): "no \(key)="
        case .invalidID(let id):
            "Id=\(Printable.quoted(id)) is not an id (ASCII letters, digits, '.', '_' and '-', at most 255 bytes)"
        case .noIdentifier: "none of Executable=, FlatpakId= and SnapName="
        case .severalIdentifiers(let keys):
            "more than one of Executable=, FlatpakId= and SnapName= (\(keys.map { $0 + "=" }.joined(separator: ", ")))"
        case .invalidExecutable(let path):
            "Executable=\(Printable.quoted(path)) is not an absolute, normalized path (no '.', '..' or '//')"
        case .invalidFlatpakID(let id): "FlatpakId=\(Printable.quoted(id)) is not a Flatpak application id"
        case .invalidSnapName(let name): "SnapName=\(Printable.quoted(name)) is not a snap name"
        case .noAccessGroups: "AccessGroups= is empty"
        case .tooManyAccessGroups(let limit): "more than \(limit) access groups"
        case .invalidAccessGroup(let group):
            "the access group \(Printable.quoted(group)) is empty, longer than 255 bytes, has white space at an end "
                + "or holds a control character"
        case .repeatedAccessGroup(let group): "the access group \(Printable.quoted(group)) is listed twice"
        case .unknownPrivilege(let name):
            "Privileges= names \(Printable.quoted(name)), which is not a privilege (known: "
                + ApplicationPrivilege.allCases.map(\.rawValue).sorted().joined(separator: ", ") + ")"
        case .repeatedPrivilege(let name): "the privilege \(Printable.quoted(name)) is listed twice"
        case .privilegesNeedExecutable: "Privileges= is granted only to a program named by Executable="
        case .value(let error): error.description
        }
    }
}
