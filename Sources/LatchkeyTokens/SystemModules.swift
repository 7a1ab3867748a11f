import LatchkeySystem
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// The modules of the system's p11-kit configuration, read here rather than by `p11_kit_modules_load`:
/// p11-kit would also load the modules of the user's `~/.config/pkcs11/modules` (it skips them only for
/// root and setuid programs unless `P11_KIT_NO_USER_CONFIG` is set), and loading a
/// module runs its code, so the agent decides which files it reads before anything is loaded
/// (docs/TOKENS.md §1). Only the system directories count, and only files root alone can change.
enum SystemModules {
    /// p11-kit's package directory and the administrator's, which overrides a package file of the same name.
    static let directories = ["/usr/share/p11-kit/modules", "/etc/pkcs11/modules"]
    /// Where p11-kit looks for a module given by a relative name.
    static let moduleDirectory = "/usr/lib/x86_64-linux-gnu/pkcs11"
    /// The program name that `enable-in:` and `disable-in:` are matched against.
    static let programName = "latchkeyd"
    static let maximumFileSize = 16 * 1024
    static let maximumFiles = 64

    struct Entry: Equatable {
        /// The configuration's name (its file name without `.module`).
        var name: String
        var path: String
    }

    /// The modules to load, with why others were left out (for the log).
    static func list() -> (modules: [Entry], notes: [String]) {
        var byName: [String: Entry] = [:]
        var notes: [String] = []
        for directory in directories {
            guard TokenConfiguration.isRootOnly(directory, directory: true) else { continue }
            let files = names(in: directory)
            for file in files.sorted().prefix(maximumFiles) where file.hasSuffix(".module") {
                let name = String(file.dropLast(".module".count))
                let path = directory + "/" + file
                guard TokenConfiguration.isRootOnly(path),
                    let bytes = try? Files.read(FilePath(path), upTo: maximumFileSize, owner: 0)
                else {
                    notes.append("\(path) is not read: not a regular file that only root can change")
                    byName[name] = nil
                    continue
                }
                switch entry(name: name, text: String(decoding: bytes, as: UTF8.self)) {
                case .success(let entry): byName[name] = entry
                case .failure(let note):
                    byName[name] = nil
                    notes.append("\(path): \(note.text)")
                }
            }
        }
        return (byName.keys.sorted().map { byName[$0]! }, notes)
    }

    /// The names in `directory` (at most `maximumFiles` plus one, so a flood is cut short).
    static func names(in directory: String) -> [String] {
        guard let stream = opendir(directory) else { return [] }
        defer { closedir(stream) }
        var names: [String] = []
        while names.count <= maximumFiles, let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { bytes in
                String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    struct Note: Error {
        var text: String
    }

    /// One `.module` file's `key: value` lines: the module, unless p11-kit would not give it to this
    /// program (`enable-in`, `disable-in`) or it is a trust-policy module (the system's CAs, not tokens).
    static func entry(name: String, text: String) -> Result<Entry, Note> {
        var options: [String: String] = [:]
        for line in text.split(separator: "\n") {
            let trimmed = line.drop { $0 == " " || $0 == "\t" }
            guard !trimmed.hasPrefix("#"), let colon = trimmed.firstIndex(of: ":") else { continue }
            let key = trimmed[..<colon].trimmingCharacters(in: " \t")
            let value = trimmed[trimmed.index(after: colon)...].trimmingCharacters(in: " \t\r")
            options[key] = value
        }
        guard let module = options["module"], !module.isEmpty else { return .failure(Note(text: "no module")) }
        if options["trust-policy"] == "yes" { return .failure(Note(text: "a trust-policy module, not tokens")) }
        let programs = { (key: String) -> [String] in
            (options[key] ?? "").split(separator: ",").map { $0.trimmingCharacters(in: " \t") }
        }
        if options["enable-in"] != nil, !programs("enable-in").contains(programName) {
            return .failure(Note(text: "not enabled in \(programName)"))
        }
        if programs("disable-in").contains(programName) {
            return .failure(Note(text: "disabled in \(programName)"))
        }
        let path = module.hasPrefix("/") ? module : moduleDirectory + "/" + module
        guard TokenConfiguration.isRootOnly(path) else {
            return .failure(Note(text: "its module \(path) is not a file that only root can change"))
        }
        return .success(Entry(name: name, path: path))
    }
}

extension StringProtocol {
    fileprivate func trimmingCharacters(in set: String) -> String {
        var text = Substring(self)
        while let first = text.first, set.contains(first) { text.removeFirst() }
        while let last = text.last, set.contains(last) { text.removeLast() }
        return String(text)
    }
}
