import Foundation
import LatchkeyTestSupport
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// A login process that keeps its session open, as login(1), sshd or a display manager do: a small
/// Linux-PAM application (Python with ctypes over the real libpam, run as root) that authenticates,
/// opens the session, reports the results and then waits. `close()` closes the session as a logout
/// does, `end()` lets it exit without closing (pam_end only), and `kill()` kills it like a crashed
/// login process. pamtester cannot stand in for it: it exits right after its last operation, and the
/// agent ends the session of a login process that is gone.
final class LoginProcess {
    let process: Process
    private let input: Pipe
    private let output: Pipe
    /// 0 when both authenticate and open_session succeeded, 1 otherwise.
    let status: Int32
    /// The PAM results, for failure messages.
    let err: String

    var pid: pid_t { process.processIdentifier }

    /// Starts the driver as root for `service` and `user`, with `password`; returns once the session is
    /// open (or the stack refused).
    init(driver: String, service: String, user: String, password: String) throws {
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-I", driver, service, user]
        input = Pipe()
        output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        input.fileHandleForWriting.write(Data((password + "\n").utf8))
        let line = Self.readLine(output.fileHandleForReading)
        err = line
        status = line == "authenticate 0 open_session 0" ? 0 : 1
    }

    /// Closes the session (pam_close_session) and waits for the process; returns the close's result line.
    @discardableResult
    func close() -> String {
        guard process.isRunning else { return "not running" }
        input.fileHandleForWriting.write(Data("close\n".utf8))
        let line = Self.readLine(output.fileHandleForReading)
        end()
        return line
    }

    /// Lets the process exit without closing the session, and waits for it.
    func end() {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }

    /// SIGKILL, and waits for it: a login process that dies without closing its session.
    func kill() {
        if process.isRunning { Glibc.kill(pid, SIGKILL) }
        process.waitUntilExit()
    }

    private static func readLine(_ handle: FileHandle) -> String {
        var bytes = Data()
        while true {
            let byte = handle.readData(ofLength: 1)
            if byte.isEmpty || byte == Data("\n".utf8) { break }
            bytes += byte
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The driver's source, written next to the test's agent.
    static let source = #"""
        """A login process for the pam_latchkey tests: a Linux-PAM application, as login(1) or sshd are.

        usage: login-driver.py SERVICE USER, with the password on the first line of standard input.
        It authenticates, opens the session and prints one line, "authenticate N open_session N" (the PAM
        results). Then it waits on standard input: the line "close" closes the session (and prints
        "close_session N"); the end of input ends the process without closing it, as a login process that
        dies would. Either way it calls pam_end before it exits.
        """
        import ctypes
        import sys

        PAM_PROMPT_ECHO_OFF, PAM_PROMPT_ECHO_ON, PAM_BUF_ERR = 1, 2, 5


        class Message(ctypes.Structure):
            _fields_ = [("msg_style", ctypes.c_int), ("msg", ctypes.c_char_p)]


        class Response(ctypes.Structure):
            _fields_ = [("resp", ctypes.c_void_p), ("resp_retcode", ctypes.c_int)]


        CONVERSE = ctypes.CFUNCTYPE(
            ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.POINTER(Message)),
            ctypes.POINTER(ctypes.POINTER(Response)), ctypes.c_void_p)


        class Conversation(ctypes.Structure):
            _fields_ = [("conv", CONVERSE), ("appdata_ptr", ctypes.c_void_p)]


        libc = ctypes.CDLL(None)
        libc.calloc.restype, libc.calloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t, ctypes.c_size_t]
        libc.strdup.restype, libc.strdup.argtypes = ctypes.c_void_p, [ctypes.c_char_p]
        pam = ctypes.CDLL("libpam.so.0")
        pam.pam_start.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(Conversation),
                                  ctypes.POINTER(ctypes.c_void_p)]
        for name in ("pam_authenticate", "pam_open_session", "pam_close_session", "pam_end"):
            getattr(pam, name).argtypes = [ctypes.c_void_p, ctypes.c_int]

        service, user = sys.argv[1], sys.argv[2]
        password = sys.stdin.readline().rstrip("\n").encode()


        @CONVERSE
        def converse(count, messages, responses, _data):
            # Linux-PAM frees the answers: they must come from malloc.
            answers = libc.calloc(count, ctypes.sizeof(Response))
            if not answers:
                return PAM_BUF_ERR
            array = ctypes.cast(answers, ctypes.POINTER(Response))
            for i in range(count):
                if messages[i].contents.msg_style in (PAM_PROMPT_ECHO_OFF, PAM_PROMPT_ECHO_ON):
                    array[i].resp = libc.strdup(password)
            responses[0] = array
            return 0


        conversation = Conversation(converse, None)
        handle = ctypes.c_void_p()
        started = pam.pam_start(service.encode(), user.encode(), ctypes.byref(conversation), ctypes.byref(handle))
        authenticated = pam.pam_authenticate(handle, 0) if started == 0 else started
        opened = pam.pam_open_session(handle, 0) if authenticated == 0 else -1
        print(f"authenticate {authenticated} open_session {opened}", flush=True)
        if sys.stdin.readline().strip() == "close" and opened == 0:
            print(f"close_session {pam.pam_close_session(handle, 0)}", flush=True)
        if started == 0:
            pam.pam_end(handle, 0)
        """#
}
