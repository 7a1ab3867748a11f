/// An application file in force: who the application is and the access groups it gets.
package struct Application: Sendable, Equatable {
    /// How a caller is recognized as this application.
    package enum Identity: Sendable, Equatable {
        /// A host program: the file at `path`, which was that device and inode when the file was loaded.
        case executable(path: String, device: UInt64, inode: UInt64)
        /// A Flatpak application, by the id its sandbox reports.
        case flatpak(String)
        /// A snap, by the name in its AppArmor label.
        case snap(String)

        /// How `latchkey apps` shows it: `executable /usr/bin/x`, `flatpak org.example.App`, `snap name`.
        package var description: String {
            switch self {
            case .executable(let path, _, _): "executable \(Printable.escaped(path))"
            case .flatpak(let id): "flatpak \(id)"
            case .snap(let name): "snap \(name)"
            }
        }
    }

    /// `Id=`.
    package var id: String
    package var identity: Identity
    /// `AccessGroups=`, in order: the first is where the application's new items go.
    package var accessGroups: [String]
    /// The application file it came from.
    package var file: String
    /// `Privileges=`: none unless the file grants some (only an `Executable=` file may).
    package var privileges: Set<ApplicationPrivilege>

    package init(
        id: String, identity: Identity, accessGroups: [String], file: String,
        privileges: Set<ApplicationPrivilege> = []
    ) {
        self.id = id
        self.identity = identity
        self.accessGroups = accessGroups
        self.file = file
        self.privileges = privileges
    }
}

/// A file (or a directory entry) of an applications.d directory that grants nothing, and why.
package struct IgnoredFile: Sendable, Equatable, CustomStringConvertible {
    /// Why it is ignored.
    package enum Reason: Sendable, Equatable, CustomStringConvertible {
        /// Its name does not end in `.conf`, or starts with `.` (editor and package-manager leftovers
        /// such as `x.conf~` or `x.conf.dpkg-old` are never read).
        case notAnApplicationFile
        /// Its name is not UTF-8.
        case nameNotUTF8
        /// A file of the same name in a later directory (`/etc` over `/usr/share`) takes its place,
        /// whatever that file holds: an empty or broken file there disables this one.
        case overridden(by: String)
        /// The file breaks the ownership rule (or could not be read).
        case untrusted(TrustProblem)
        /// The file is empty: it only overrides a file of the same name in an earlier directory.
        case empty
        /// Not a key file (`KeyFile`).
        case malformed(KeyFileError)
        /// A key file, but not a valid application file.
        case invalid(ApplicationFileError)
        /// Its `Executable=` breaks the ownership rule.
        case untrustedExecutable(TrustProblem)
        /// Another file in force has the same `Id=`; all of them are ignored.
        case sameID(String, others: [String])
        /// Another file in force names the same application (the same executable file, Flatpak id or
        /// snap name, described by the string); all of them are ignored.
        case sameApplication(String, others: [String])

        package var description: String {
            switch self {
            case .notAnApplicationFile: "not read: application files are named *.conf (and not hidden)"
            case .nameNotUTF8: "not read: the name is not UTF-8"
            case .overridden(let path): "overridden by \(Printable.escaped(path))"
            case .untrusted(let problem): problem.description
            case .empty: "empty: grants nothing (in /etc it disables the package's file of the same name)"
            case .malformed(let error): error.description
            case .invalid(let error): error.description
            case .untrustedExecutable(let problem): "Executable= does not count: \(problem)"
            case .sameID(let id, let others):
                "Id=\(id) is also in \(others.map(Printable.escaped).joined(separator: ", ")); each is ignored"
            case .sameApplication(let what, let others):
                "\(others.map(Printable.escaped).joined(separator: ", ")) also names \(what); each is ignored"
            }
        }
    }

    /// The file's path (escaped for printing if its name is not UTF-8).
    package var path: String
    package var reason: Reason

    package init(path: String, reason: Reason) {
        self.path = path
        self.reason = reason
    }

    package var description: String {
        "\(Printable.escaped(path)): \(reason)"
    }
}

/// One directory of application files, and what came of reading it.
package struct ApplicationDirectory: Sendable, Equatable {
    /// What the loader found.
    package enum State: Sendable, Equatable, CustomStringConvertible {
        /// Read: its files are in force or listed as ignored.
        case read
        /// It (or a directory above it) does not exist: no files of this kind are installed.
        case absent
        /// It breaks the ownership rule, or could not be listed: none of its files counts, and none
        /// overrides another.
        case untrusted(TrustProblem)
        /// More entries than `ApplicationRegistry.Limits.entriesPerDirectory`: none of its files counts.
        case tooManyEntries(limit: Int)

        package var description: String {
            switch self {
            case .read: "read"
            case .absent: "absent"
            case .untrusted(let problem): "ignored: \(problem)"
            case .tooManyEntries(let limit): "ignored: more than \(limit) entries"
            }
        }
    }

    package var path: String
    package var state: State

    package init(path: String, state: State) {
        self.path = path
        self.state = state
    }
}
