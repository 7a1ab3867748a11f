import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// Reads applications.d directories into applications in force and ignored files (docs/APPLICATIONS.md):
/// the ownership rule for directories and files, the override of a file by one of the same name in a
/// later directory, the checks of each file, and the rule that two files claiming the same id or the
/// same application are both ignored.
struct ApplicationLoader {
    /// A file that passed its own checks, before the files are compared with each other.
    private struct Candidate {
        var path: String
        var declaration: ApplicationDeclaration
        var identity: Application.Identity
    }

    private(set) var applications: [Application] = []
    private(set) var ignored: [IgnoredFile] = []
    private(set) var directories: [ApplicationDirectory] = []
    /// The groups of every file whose content was valid, in force or not (`ApplicationRegistry.grant`).
    private(set) var declaredGroups: Set<String> = []
    /// Every path looked at and what it was, for `ApplicationsFingerprint`.
    private(set) var observed: [TrustedPaths.Observation] = []

    /// Loads `paths`, lowest precedence first.
    init(paths: [String]) {
        // The files that count, by name: a later directory's file replaces an earlier one's.
        var chosen: [String: (directory: Int, path: String)] = [:]
        var open: [FileDescriptor?] = []
        defer { for fd in open { try? fd?.close() } }
        for (index, path) in paths.enumerated() {
            guard let (fd, names) = list(path) else {
                open.append(nil)
                continue
            }
            open.append(fd)
            for bytes in names {
                guard let name = String(validating: bytes, as: UTF8.self) else {
                    ignored.append(IgnoredFile(path: path + "/" + Printable.name(bytes), reason: .nameNotUTF8))
                    continue
                }
                let filePath = path + "/" + name
                guard name.hasSuffix(".conf"), name.count > ".conf".count, !name.hasPrefix(".") else {
                    ignored.append(IgnoredFile(path: filePath, reason: .notAnApplicationFile))
                    continue
                }
                if let earlier = chosen[name] {
                    ignored.append(IgnoredFile(path: earlier.path, reason: .overridden(by: filePath)))
                }
                chosen[name] = (index, filePath)
            }
        }
        var candidates: [Candidate] = []
        for name in chosen.keys.sorted() {
            let (directory, path) = chosen[name]!
            // Only a directory that was read has names in `chosen`.
            if let fd = open[directory], let candidate = read(name, in: fd, path: path) {
                candidates.append(candidate)
            }
        }
        admit(candidates)
        ignored.sort { $0.path < $1.path }
        applications.sort { $0.id < $1.id }
    }

    /// Opens and lists the directory at `path`, recording its state; nil if none of its files counts.
    private mutating func list(_ path: String) -> (FileDescriptor, [[UInt8]])? {
        let fd: FileDescriptor
        do throws(TrustProblem) {
            fd = try TrustedPaths.openDirectory(path, observed: &observed)
        } catch {
            if case .missing = error {
                directories.append(ApplicationDirectory(path: path, state: .absent))
            } else {
                directories.append(ApplicationDirectory(path: path, state: .untrusted(error)))
            }
            return nil
        }
        do throws(Errno) {
            guard let names = try DirectoryListing.names(in: fd, limit: ApplicationRegistry.Limits.entriesPerDirectory)
            else {
                try? fd.close()
                directories.append(
                    ApplicationDirectory(
                        path: path, state: .tooManyEntries(limit: ApplicationRegistry.Limits.entriesPerDirectory)))
                return nil
            }
            directories.append(ApplicationDirectory(path: path, state: .read))
            return (fd, names)
        } catch {
            try? fd.close()
            directories.append(ApplicationDirectory(path: path, state: .untrusted(.system(path, error))))
            return nil
        }
    }

    /// One file's own checks: ownership, syntax, content, and its executable's ownership.
    private mutating func read(_ name: String, in directory: FileDescriptor, path: String) -> Candidate? {
        let bytes: [UInt8]
        do throws(TrustProblem) {
            let file = try TrustedPaths.readFile(name, in: directory, path: path, limit: KeyFile.Limits.fileBytes)
            bytes = file.bytes
            observed.append(TrustedPaths.Observation(path: path, state: file.state, content: true))
        } catch {
            observed.append(TrustedPaths.Observation(path: path, state: FileState(path: path), content: true))
            ignored.append(IgnoredFile(path: path, reason: .untrusted(error)))
            return nil
        }
        guard !bytes.isEmpty else {
            ignored.append(IgnoredFile(path: path, reason: .empty))
            return nil
        }
        let declaration: ApplicationDeclaration
        do {
            declaration = try ApplicationDeclaration.parse(try KeyFile.parse(bytes))
        } catch let error as KeyFileError {
            ignored.append(IgnoredFile(path: path, reason: .malformed(error)))
            return nil
        } catch let error as ApplicationFileError {
            ignored.append(IgnoredFile(path: path, reason: .invalid(error)))
            return nil
        } catch {
            preconditionFailure("not reached: the parsers throw only their own errors")
        }
        declaredGroups.formUnion(declaration.accessGroups)
        let identity: Application.Identity
        switch declaration.identifier {
        case .executable(let executable):
            do throws(TrustProblem) {
                let (device, inode) = try TrustedPaths.executable(executable, observed: &observed)
                identity = .executable(path: executable, device: device, inode: inode)
            } catch {
                ignored.append(IgnoredFile(path: path, reason: .untrustedExecutable(error)))
                return nil
            }
        case .flatpak(let id): identity = .flatpak(id)
        case .snap(let name): identity = .snap(name)
        }
        return Candidate(path: path, declaration: declaration, identity: identity)
    }

    /// Admits the candidates that share neither their id nor their application with another. When two
    /// files claim the same id or the same executable file, Flatpak or snap, there is no telling which
    /// one the administrator meant, and granting either (or the union of their groups) could give an
    /// application groups nobody meant it to have: each of them is ignored, and the application is an
    /// unlisted program until one of the files goes.
    private mutating func admit(_ candidates: [Candidate]) {
        func claim(_ identity: Application.Identity) -> String {
            switch identity {
            // By the file, not the path: two paths that are hard links to one file are one claim.
            case .executable(_, let device, let inode): "executable file \(device):\(inode)"
            case .flatpak(let id): "flatpak \(id)"
            case .snap(let name): "snap \(name)"
            }
        }
        let byID = Dictionary(grouping: candidates.indices) { candidates[$0].declaration.id }
        let byClaim = Dictionary(grouping: candidates.indices) { claim(candidates[$0].identity) }
        for (index, candidate) in candidates.enumerated() {
            let sameID = byID[candidate.declaration.id]!.filter { $0 != index }
            if !sameID.isEmpty {
                let others = sameID.map { candidates[$0].path }
                ignored.append(
                    IgnoredFile(path: candidate.path, reason: .sameID(candidate.declaration.id, others: others)))
                continue
            }
            let sameClaim = byClaim[claim(candidate.identity)]!.filter { $0 != index }
            if !sameClaim.isEmpty {
                let what =
                    switch candidate.identity {
                    case .executable: "the same executable file"
                    case .flatpak(let id): "FlatpakId=\(id)"
                    case .snap(let name): "SnapName=\(name)"
                    }
                let others = sameClaim.map { candidates[$0].path }
                ignored.append(IgnoredFile(path: candidate.path, reason: .sameApplication(what, others: others)))
                continue
            }
            applications.append(
                Application(
                    id: candidate.declaration.id, identity: candidate.identity,
                    accessGroups: candidate.declaration.accessGroups, file: candidate.path,
                    privileges: candidate.declaration.privileges))
        }
    }
}
