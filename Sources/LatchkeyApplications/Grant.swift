/// What a caller may use: the access groups the agent gives a connection (issue 12 §2), and why.
package struct Grant: Sendable, Equatable, CustomStringConvertible {
    /// Why the caller gets these groups.
    package enum Basis: Sendable, Equatable, CustomStringConvertible {
        /// Its executable is the file an application file names (by device and inode, at that path),
        /// and nothing casts doubt on it.
        case executable(file: String)
        /// Its Flatpak application id is named by an application file.
        case flatpak(file: String)
        /// Its snap name is named by an application file.
        case snap(file: String)
        /// A Flatpak application no file names: its id is its only group, so its items are its own.
        case flatpakWithoutFile
        /// A snap no file names: `snap.NAME` is its only group.
        case snapWithoutFile
        /// A host program no application file names: the shared group `default`.
        case unlisted
        /// A host program that would be an application but for these doubts (traced, started with
        /// loader variables, replaced executable, unreadable): the shared group `default`.
        case doubted([CallerIdentity.Doubt])
        /// A sandbox identity that is not well formed, or two at once: no group at all. A sandboxed
        /// caller must never fall back to `default`, which holds the items of every unlisted program.
        case refused(String)

        package var description: String {
            switch self {
            case .executable(let file): "executable named by \(Printable.escaped(file))"
            case .flatpak(let file): "Flatpak id named by \(Printable.escaped(file))"
            case .snap(let file): "snap named by \(Printable.escaped(file))"
            case .flatpakWithoutFile: "Flatpak application without an application file"
            case .snapWithoutFile: "snap without an application file"
            case .unlisted: "program without an application file"
            case .doubted(let doubts): "no application identity (\(doubts.map(Self.describe).joined(separator: ", ")))"
            case .refused(let why): "refused: \(Printable.escaped(why))"
            }
        }

        private static func describe(_ doubt: CallerIdentity.Doubt) -> String {
            switch doubt {
            case .traced(let tracer): "traced by pid \(tracer)"
            case .loaderVariable(let name): "started with \(Printable.escaped(name))"
            case .replacedExecutable: "executable replaced or deleted"
            case .unreadable(let why): "unreadable: \(Printable.escaped(why))"
            case .otherNamespace(let which): "in another \(Printable.escaped(which)) namespace"
            case .unconfirmed(let why): "not confirmed: \(Printable.escaped(why))"
            }
        }
    }

    /// The application's id: `Id=` of the file that matched, or a Flatpak's id or `snap.NAME` for a
    /// sandboxed application without a file; nil for an unlisted or doubted program.
    package var applicationID: String?
    /// The groups, in order: the first is where new items go. Empty only for `.refused`: the caller may
    /// then use no group at all, and adding an item must fail (there is no first group to put it in).
    package var accessGroups: [String]
    package var basis: Basis
    /// What the caller may do besides using its groups: only an executable's file grants any
    /// (`Basis.executable`); every other basis has none.
    package var privileges: Set<ApplicationPrivilege>

    package init(
        applicationID: String?, accessGroups: [String], basis: Basis, privileges: Set<ApplicationPrivilege> = []
    ) {
        self.applicationID = applicationID
        self.accessGroups = accessGroups
        self.basis = basis
        self.privileges = privileges
    }

    /// `default`, for a program that is no application.
    static func shared(_ basis: Basis) -> Grant {
        Grant(applicationID: nil, accessGroups: [ApplicationRegistry.defaultAccessGroup], basis: basis)
    }

    /// For the agent's log: `org.example.Mail [mail;shared] (executable named by /etc/...)`.
    package var description: String {
        let extra = privileges.isEmpty ? "" : " +" + privileges.map(\.rawValue).sorted().joined(separator: "+")
        return "\(applicationID ?? "-") [\(accessGroups.joined(separator: ";"))]\(extra) (\(basis))"
    }
}
