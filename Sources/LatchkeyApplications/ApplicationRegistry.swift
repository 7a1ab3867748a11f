/// The application files in force and the groups each caller gets (issue 12 §2, docs/APPLICATIONS.md):
/// Apple's entitlements, as files only root can write.
///
/// Loaded once from the applications.d directories (see `ApplicationRegistryWatch` for reloading); a
/// value, so the agent can hand the same registry to every thread.
package struct ApplicationRegistry: Sendable {
    /// The group of every program that is no application: where items added before issue 12 are.
    ///
    /// Must equal the engine's `Caller.defaultAccessGroup` (LatchkeyEngine). This module cannot import
    /// the engine (the CLI uses it too, and neither the engine nor this module should depend on the
    /// other), so the string is pinned here by `ApplicationRegistryTests.testDefaultGroupIsTheEnginesDefault`
    /// and on the engine's side by its store vectors (`agrp` "default" in store-v1.json).
    package static let defaultAccessGroup = "default"

    /// Where application files live, lowest precedence first: packages, then the administrator,
    /// whose file of the same name replaces the package's.
    package static let defaultDirectories = ["/usr/share/latchkey/applications.d", "/etc/latchkey/applications.d"]

    /// Caps on what one load reads (a file's own caps are `KeyFile.Limits`).
    package enum Limits {
        /// Entries in one directory; a directory with more is ignored whole.
        package static let entriesPerDirectory = 1024
    }

    /// The directories it was loaded from, lowest precedence first, and what came of each.
    package let directories: [ApplicationDirectory]
    /// The applications in force, by id.
    package let applications: [Application]
    /// The files that grant nothing, by path, each with its reason.
    package let ignored: [IgnoredFile]
    /// What the directories, files and executables were when they were read.
    package let fingerprint: ApplicationsFingerprint

    /// Every group an application file grants, the files ignored after their content was read included.
    private let declaredGroups: Set<String>
    private let byExecutable: [ExecutableKey: Application]
    private let byFlatpak: [String: Application]
    private let bySnap: [String: Application]

    private struct ExecutableKey: Hashable {
        var device: UInt64
        var inode: UInt64
    }

    /// Loads the default directories (`defaultDirectories`).
    package init() {
        self.init(directories: Self.defaultDirectories)
    }

    /// Loads `directories`, lowest precedence first.
    ///
    /// Tests pass temporary directories here. They get no shortcut: a directory counts only if it and
    /// every directory above it are owned by root and writable by root only, exactly as the defaults
    /// must be, so the agent can only ever be pointed at directories that only root controls.
    package init(directories: [String]) {
        let started = ApplicationsFingerprint.now()
        let loader = ApplicationLoader(paths: directories)
        self.directories = loader.directories
        applications = loader.applications
        ignored = loader.ignored
        fingerprint = ApplicationsFingerprint(observations: loader.observed, loadStarted: started)
        declaredGroups = loader.declaredGroups
        var byExecutable: [ExecutableKey: Application] = [:]
        var byFlatpak: [String: Application] = [:]
        var bySnap: [String: Application] = [:]
        for application in applications {
            // The loader admits at most one application per executable file, Flatpak id and snap name.
            switch application.identity {
            case .executable(_, let device, let inode):
                byExecutable[ExecutableKey(device: device, inode: inode)] = application
            case .flatpak(let id): byFlatpak[id] = application
            case .snap(let name): bySnap[name] = application
            }
        }
        self.byExecutable = byExecutable
        self.byFlatpak = byFlatpak
        self.bySnap = bySnap
    }

    /// The groups `identity` gets:
    ///
    /// - A Flatpak application: its file's groups, or without a file its id alone. A snap: its file's
    ///   groups, or `snap.NAME` alone. Doubts about the executable do not matter: the sandbox, not the
    ///   executable, vouches for these identities.
    /// - A host program whose executable is the file an application file names (the same device and
    ///   inode, run from the path the file names) and about which there is no doubt: that file's groups.
    /// - Any other caller: `default`.
    package func grant(for identity: CallerIdentity) -> Grant {
        switch (identity.flatpakID, identity.snapName) {
        case (.some, .some):
            return Grant(applicationID: nil, accessGroups: [], basis: .refused("both a Flatpak id and a snap name"))
        case (.some(let id), nil):
            if let application = byFlatpak[id] {
                return Grant(
                    applicationID: application.id, accessGroups: application.accessGroups,
                    basis: .flatpak(file: application.file))
            }
            guard ApplicationNames.isValidFlatpakID(id) else {
                return Grant(applicationID: nil, accessGroups: [], basis: .refused("Flatpak id '\(id)' is not valid"))
            }
            return ownGroup(id, basis: .flatpakWithoutFile)
        case (nil, .some(let name)):
            if let application = bySnap[name] {
                return Grant(
                    applicationID: application.id, accessGroups: application.accessGroups,
                    basis: .snap(file: application.file))
            }
            guard ApplicationNames.isValidSnapName(name) else {
                return Grant(applicationID: nil, accessGroups: [], basis: .refused("snap name '\(name)' is not valid"))
            }
            return ownGroup(ApplicationNames.snapGroup(name), basis: .snapWithoutFile)
        case (nil, nil):
            break
        }
        guard identity.doubts.isEmpty else { return .shared(.doubted(identity.doubts)) }
        guard let executable = identity.executable,
            let application = byExecutable[ExecutableKey(device: executable.device, inode: executable.inode)],
            case .executable(let path, _, _) = application.identity,
            // The file, run from the path the administrator named: the same file reached through a hard
            // link elsewhere (where libraries found through $ORIGIN could be anyone's) is not the
            // application.
            executable.path == path
        else { return .shared(.unlisted) }
        return Grant(
            applicationID: application.id, accessGroups: application.accessGroups,
            basis: .executable(file: application.file), privileges: application.privileges)
    }

    /// A sandboxed application without a file gets `group` alone, unless an application file grants
    /// that group to someone: anyone may install a Flatpak (`flatpak --user`) under any id, and one
    /// named like another application's group would otherwise read that application's items. Such an
    /// application gets no group until a file names it.
    private func ownGroup(_ group: String, basis: Grant.Basis) -> Grant {
        guard !declaredGroups.contains(group) else {
            return Grant(
                applicationID: nil, accessGroups: [],
                basis: .refused("'\(group)' is a group an application file grants; only a file naming it can grant it"))
        }
        return Grant(applicationID: group, accessGroups: [group], basis: basis)
    }
}
