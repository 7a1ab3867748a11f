import ArgumentParser
import LatchkeyApplications

/// `latchkey apps`: the application files in force, what each grants, and the files that are ignored
/// and why (docs/APPLICATIONS.md). Reads the files itself, with the agent's rules; needs no agent.
struct AppsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apps",
        abstract: "List the application files in force, the access groups each grants, and the files ignored.",
        discussion: """
            Reads /usr/share/latchkey/applications.d (packages) and /etc/latchkey/applications.d \
            (the administrator, whose file of the same name replaces the package's) as the agent \
            does, and prints each directory's state, a table of the applications in force (id, how \
            the kernel recognizes it, its access groups in order, its file), and every file that \
            grants nothing with the reason. A file counts only if it, the executable it names and \
            every directory above them are owned by root and writable by root only; see \
            docs/APPLICATIONS.md. Does not start the agent; the agent rereads the files when they \
            change.

            Without an application file, a Flatpak application gets its application id as its only \
            access group, a snap gets snap.NAME, and any other program gets the group 'default'.

            Example:
              latchkey apps
              latchkey apps --directory /root/drafts/applications.d
            """)

    @Option(
        name: .customLong("directory"),
        help: ArgumentHelp(
            "Read this directory instead of the default ones (repeatable, lowest precedence first), to check "
                + "files before installing them; the ownership rules still apply.",
            valueName: "path"))
    var directories: [String] = []

    func validate() throws {
        for directory in directories where !ApplicationNames.isNormalizedAbsolutePath(directory) {
            throw ValidationError("--directory \(directory): give an absolute path without '.', '..' or '//'")
        }
    }

    func run() {
        let registry = ApplicationRegistry(
            directories: directories.isEmpty ? ApplicationRegistry.defaultDirectories : directories)
        print(Self.render(registry), terminator: "")
    }

    /// The directories, the table of applications, the ignored files and the rule for everyone else.
    static func render(_ registry: ApplicationRegistry) -> String {
        var lines = registry.directories.map { "directory: \(Printable.escaped($0.path)) (\($0.state))" }
        lines.append("")
        if registry.applications.isEmpty {
            lines.append("no application files in force")
        } else {
            var rows = [["APPLICATION", "IDENTIFIED BY", "ACCESS GROUPS", "FILE"]]
            for application in registry.applications {
                rows.append([
                    application.id, application.identity.description,
                    application.accessGroups.map(escapedGroup).joined(separator: ";"),
                    Printable.escaped(application.file),
                ])
            }
            lines += table(rows)
            // Privileges are rare and powerful: a line each, below the table, rather than a column.
            for application in registry.applications where !application.privileges.isEmpty {
                let names = application.privileges.map(\.rawValue).sorted().joined(separator: ";")
                lines.append("privileges of \(application.id): \(names)")
            }
        }
        if !registry.ignored.isEmpty {
            lines.append("")
            lines += registry.ignored.map { "ignored: \($0)" }
        }
        lines.append("")
        lines.append(
            "without a file: a Flatpak application gets its application id as its only group, a snap "
                + "snap.NAME, any other program '\(ApplicationRegistry.defaultAccessGroup)'")
        return lines.joined(separator: "\n") + "\n"
    }

    /// A group as `AccessGroups=` would hold it, so that `a\;b` (one group) and `a;b` (two) differ.
    private static func escapedGroup(_ group: String) -> String {
        Printable.escaped(group).replacingOccurrences(of: ";", with: "\\;")
    }

    /// Columns padded to their widest cell, two spaces apart; the last column is not padded.
    private static func table(_ rows: [[String]]) -> [String] {
        let widths = (0..<rows[0].count).map { column in rows.map { $0[column].count }.max() ?? 0 }
        return rows.map { row in
            row.enumerated().map { column, cell in
                column == row.count - 1 ? cell : cell + String(repeating: " ", count: widths[column] - cell.count)
            }.joined(separator: "  ")
        }
    }
}
