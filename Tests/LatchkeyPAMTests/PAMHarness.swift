import Foundation
import LatchkeyKeybag
import LatchkeySecrets
import LatchkeyTestSupport
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// Real PAM against `pam/pam_latchkey.so` and the built agent: each test gets a fresh system user, a
/// PAM service file in /etc/pam.d naming the module by absolute path, a private runtime directory
/// and machine secret, and runs `pamtester` as root and the `latchkey` CLI as the user. Needs root
/// and pamtester; skipped otherwise. Everything is removed in tearDown.
///
/// The module runs only an agent that nobody but root can have written (the file and every directory
/// above it), so the tests give it a root-owned copy of the built `latchkeyd` in their own directory:
/// that holds whoever owns the checkout and whatever its permissions.
class PAMTestCase: XCTestCase {
    static let repository = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
    static var modulePath: String { repository + "/pam/pam_latchkey.so" }

    /// Where `swift build` put the executables (the test bundle sits beside them).
    static var binDirectory: String { TestProcess.binDirectory }

    /// `make -C pam` once per test process, so `swift test` alone is enough.
    nonisolated(unsafe) private static var moduleBuild: (status: Int32, output: String)?

    static let pamtester = "/usr/bin/pamtester"
    let password = "Lk-first-pass-1"

    var user = ""
    var uid: uid_t = 0
    var gid: gid_t = 0
    var home = ""
    var base = ""
    var runtime = ""
    var machineSecret = ""
    var services: [String] = []
    /// Login processes still running (see `login`), killed in tearDown.
    var logins: [LoginProcess] = []

    var keychainDirectory: String { home + "/.local/share/latchkey" }
    /// The agent the module starts: a copy of the built latchkeyd, root's, mode 0755, in `base/bin`.
    var agentPath: String { base + "/bin/latchkeyd" }
    /// The login process's program (`LoginProcess.source`), root's, beside the agent.
    var loginDriverPath: String { base + "/bin/login-driver.py" }
    var keybagPath: String { keychainDirectory + "/keybag" }
    var markerPath: String { keychainDirectory + "/password-out-of-step" }

    /// Options every module line gets: the built agent, private directories, cheap Argon2id for
    /// keybags the module creates, and debug logging.
    var moduleOptions: String {
        "agent=\(agentPath) runtime_dir=\(runtime) machine_secret=\(machineSecret) "
            + "allow_weak_argon2 argon2_t=1 argon2_m=8192 argon2_p=1 debug"
    }

    override func setUpWithError() throws {
        try XCTSkipUnless(
            geteuid() == 0, "pam_latchkey integration tests need root (they create a user and /etc/pam.d files)")
        try XCTSkipUnless(
            FileManager.default.isExecutableFile(atPath: Self.pamtester),
            "pamtester is not installed (apt-get install pamtester)")
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: "/usr/sbin/useradd"), "useradd is not available")
        for tool in ["latchkeyd", "latchkey"] {
            try XCTSkipUnless(
                FileManager.default.isExecutableFile(atPath: Self.binDirectory + "/" + tool),
                "\(tool) not built next to the tests (swift build --build-tests)")
        }
        if Self.moduleBuild == nil {
            let make = try Self.run(["/usr/bin/make", "-C", Self.repository + "/pam"])
            Self.moduleBuild = (make.status, make.out + make.err)
        }
        guard let build = Self.moduleBuild, build.status == 0 else {
            XCTFail("make -C pam failed:\n\(Self.moduleBuild?.output ?? "")")
            throw XCTSkip("pam_latchkey.so could not be built")
        }

        let suffix = String(UInt32.random(in: 0x100000...0xffffff), radix: 16)
        user = "latchkeytest" + suffix
        XCTAssertEqual(try Self.run(["/usr/sbin/useradd", "-m", "-s", "/bin/sh", user]).status, 0, "useradd")
        try setLoginPassword(password)
        guard let entry = getpwnam(user) else { throw XCTSkip("useradd did not create \(user)") }
        uid = entry.pointee.pw_uid
        gid = entry.pointee.pw_gid
        home = String(cString: entry.pointee.pw_dir)

        base = NSTemporaryDirectory() + "lk-pam-" + suffix
        runtime = base + "/run"
        machineSecret = base + "/machine/machine-secret"  // the module creates the directory
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true)
        chmod(base, 0o755)
        chmod(runtime, 0o700)
        chown(runtime, uid, gid)
        try installAgent(at: agentPath)
        try LoginProcess.source.write(toFile: loginDriverPath, atomically: true, encoding: .utf8)
        chmod(loginDriverPath, 0o644)
    }

    /// Copies the built latchkeyd to `path` (root's, mode 0755, in a directory of mode 0755).
    func installAgent(at path: String) throws {
        let directory = (path as NSString).deletingLastPathComponent
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        chmod(directory, 0o755)
        try? FileManager.default.removeItem(atPath: path)
        try FileManager.default.copyItem(atPath: Self.binDirectory + "/latchkeyd", toPath: path)
        chmod(path, 0o755)
    }

    override func tearDown() {
        guard !user.isEmpty else { return }
        for login in logins { login.kill() }
        logins = []
        stopUserProcesses()
        for service in services { unlink("/etc/pam.d/" + service) }
        _ = try? Self.run(["/usr/sbin/userdel", "-r", "-f", user])
        _ = try? FileManager.default.removeItem(atPath: base)
    }

    // MARK: Processes

    typealias Output = TestProcess.Output

    @discardableResult
    static func run(_ arguments: [String], input: String? = nil) throws -> Output {
        try TestProcess.run(arguments[0], Array(arguments.dropFirst()), input: input)
    }

    /// Runs a command as the test user with the environment a login session would give it. The CLI
    /// starts the same agent the module trusts (as an installed latchkey does): root hands keys to
    /// no other executable.
    @discardableResult
    func asUser(_ arguments: [String], input: String? = nil) throws -> Output {
        try Self.run(
            [
                "/usr/bin/setpriv", "--reuid", String(uid), "--regid", String(gid), "--init-groups",
                "/usr/bin/env", "-i", "HOME=\(home)", "USER=\(user)", "LOGNAME=\(user)", "PATH=/usr/bin:/bin",
                "XDG_RUNTIME_DIR=\(runtime)", "XDG_DATA_HOME=\(home)/.local/share",
                "LATCHKEYD=\(agentPath)",
            ] + arguments, input: input)
    }

    /// The `latchkey` command, as the user.
    @discardableResult
    func cli(_ arguments: [String], input: String? = nil) throws -> Output {
        try asUser([Self.binDirectory + "/latchkey"] + arguments, input: input)
    }

    func setLoginPassword(_ newPassword: String) throws {
        XCTAssertEqual(try Self.run(["/usr/sbin/chpasswd"], input: "\(user):\(newPassword)\n").status, 0, "chpasswd")
    }

    /// Kills every process of the test user (the agents the tests started), by pid.
    func stopUserProcesses() {
        for signal in [SIGTERM, SIGKILL] {
            let pids = userPIDs()
            if pids.isEmpty { return }
            for pid in pids { kill(pid, signal) }
            usleep(200_000)
        }
    }

    /// Live (non-zombie) processes owned by the test user.
    func userPIDs() -> [pid_t] {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return [] }
        return entries.compactMap { name -> pid_t? in
            guard let pid = pid_t(name),
                let status = TestProcess.readProcFile("/proc/\(name)/status")
            else { return nil }
            let lines = status.split(separator: "\n")
            guard let uidLine = lines.first(where: { $0.hasPrefix("Uid:") }),
                uidLine.split(separator: "\t").dropFirst().first.map(String.init) == String(uid),
                let state = lines.first(where: { $0.hasPrefix("State:") }), !state.contains("Z")
            else { return nil }
            return pid
        }
    }

    // MARK: PAM

    /// `pam_latchkey.so` with the test options, for a line of `type` with `control`.
    func moduleLine(_ type: String, _ control: String = "optional", _ extra: String = "") -> String {
        "\(type) \(control) \(Self.modulePath) \(moduleOptions) \(extra)"
    }

    /// Writes /etc/pam.d/latchkey-test-<random> and returns the service name.
    func installService(_ lines: [String]) throws -> String {
        let service = "latchkey-test-" + String(UInt32.random(in: 0x100000...0xffffff), radix: 16)
        try (lines.joined(separator: "\n") + "\n").write(
            toFile: "/etc/pam.d/" + service, atomically: true, encoding: .utf8)
        services.append(service)
        return service
    }

    /// The usual stack: pam_unix checks the password and stops a failure (requisite), then the module.
    func standardService(authExtra: String = "", sessionExtra: String = "") throws -> String {
        try installService([
            "auth requisite pam_unix.so",
            moduleLine("auth", "optional", authExtra),
            "session required pam_unix.so",
            moduleLine("session", "optional", sessionExtra),
            "password required pam_unix.so",
            moduleLine("password"),
        ])
    }

    /// Authenticates with `input` (the password and a newline) and opens a session through `service`, in a
    /// login process that keeps it open until the test closes, ends or kills it (or tearDown does).
    func login(_ service: String, input: String) throws -> LoginProcess {
        let login = try LoginProcess(
            driver: loginDriverPath, service: service, user: user,
            password: String(input.prefix { $0 != "\n" }))
        logins.append(login)
        return login
    }

    /// `echo INPUT | pamtester -v SERVICE USER OPERATIONS...`; returns the exit status and output.
    @discardableResult
    func pamtester(_ service: String, _ operations: [String], input: String) throws -> Output {
        try Self.run([Self.pamtester, "-v", service, user] + operations, input: input)
    }

    // MARK: Keychain

    /// Creates the keychain as the user with `latchkey init` and cheap Argon2id parameters, and stores
    /// one item.
    func createKeychainWithItem(password keychainPassword: String? = nil, accessible: String = "when-unlocked") throws {
        let initResult = try cli(
            [
                "init", "--password-stdin", "--argon2-memory", "8", "--argon2-time", "1",
                "--argon2-parallelism", "1", "--allow-weak-argon2",
            ],
            input: (keychainPassword ?? password) + "\n")
        XCTAssertEqual(initResult.status, 0, "latchkey init: \(initResult.err)")
        let add = try cli(
            [
                "add-generic-password", "-s", "mail", "-a", user, "--password-stdin",
                "--accessible", accessible,
            ], input: "s3cret\n")
        XCTAssertEqual(add.status, 0, "add-generic-password: \(add.err)")
    }

    /// The item's secret, or nil when the CLI cannot read it (locked, missing, ...).
    func readItem() throws -> String? {
        let find = try cli(["find-generic-password", "-s", "mail", "-a", user, "-w"])
        return find.status == 0 ? find.out.trimmingCharacters(in: .newlines) : nil
    }

    /// "locked" or "unlocked" for a class (pdmn), from `latchkey status`.
    func classState(_ pdmn: String) throws -> String? {
        let status = try cli(["status"])
        for line in status.out.split(separator: "\n") {
            let columns = line.split(separator: " ", omittingEmptySubsequences: true)
            if columns.count >= 3, columns[columns.count - 2] == pdmn { return String(columns.last!) }
        }
        return nil
    }

    func keybagBytes() -> [UInt8]? {
        FileManager.default.contents(atPath: keybagPath).map { Array($0) }
    }

    func parsedKeybag() throws -> Keybag {
        struct NoKeybag: Error, CustomStringConvertible { var description: String }
        guard let bytes = keybagBytes() else { throw NoKeybag(description: "no keybag at \(keybagPath)") }
        return try Keybag.parse(bytes, path: keybagPath)
    }

    /// Whether `candidate` opens the keybag on disk (checked with the Swift implementation).
    func keybagOpens(with candidate: String) throws -> Bool {
        let keybag = try parsedKeybag()
        return keybag.verify(
            masterKey: try keybag.deriveMasterKey(password: SecretBytes(copying: Array(candidate.utf8))))
    }

    func fileInfo(_ path: String) -> stat? {
        var st = stat()
        return lstat(path, &st) == 0 ? st : nil
    }
}
