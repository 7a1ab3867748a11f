/// What the kernel says about the process at the other end of a connection (a socket client, or a
/// Secret Service client through the bus's credentials), as far as it can be trusted to name an
/// application (issue 12, docs/SECURITY.md "Who is calling").
///
/// The agent fills it in once per connection, at `accept` (or per bus name), from a pidfd taken then,
/// so that a pid reused later cannot lend another process's identity; `ApplicationRegistry` turns it
/// into the caller's access groups.
package struct CallerIdentity: Sendable, Equatable {
    /// The executable the process runs, as `/proc/PID/exe` names it, with the device and inode that
    /// `stat` on that link gives (the file itself, whatever its path says).
    package struct Executable: Sendable, Equatable, Hashable {
        package var path: String
        package var device: UInt64
        package var inode: UInt64

        package init(path: String, device: UInt64, inode: UInt64) {
            self.path = path
            self.device = device
            self.inode = inode
        }
    }

    /// Why a process gets no application identity although it runs as the user: it is treated as an
    /// unlisted program (the `default` group) whatever its executable.
    package enum Doubt: Sendable, Equatable, Hashable {
        /// A tracer is attached (`TracerPid` in `/proc/PID/status`): it reads and writes the process at will.
        case traced(by: Int32)
        /// Started with a variable that puts code of the caller's choosing into it (`LD_PRELOAD`, ...).
        case loaderVariable(String)
        /// Its executable was removed or replaced since it started (`(deleted)`, or the path now names
        /// another file).
        case replacedExecutable
        /// What it runs or how it was started could not be read (`why`).
        case unreadable(String)
        /// It runs in another user or mount namespace than the agent (`"user"`, `"mnt"`): there a
        /// process may point `/proc/PID/exe` at any file it can open (`PR_SET_MM_EXE_FILE`) and loads
        /// its libraries from a root of its own, so its executable names no application. (A Flatpak
        /// application always has this doubt; its identity is `flatpakID`.)
        case otherNamespace(String)
        /// The request may not come from the program identified (`why`): it was written before the
        /// agent looked at the process, which may have run another program since (`exec`), or by
        /// another process that shares the connection. Unlike the others, this doubt comes with no
        /// identity at all, sandboxed or not: `executable`, `flatpakID` and `snapName` are nil.
        case unconfirmed(String)
    }

    package var uid: UInt32
    package var pid: Int32
    /// When the process started (clock ticks since boot, field 22 of `/proc/PID/stat`), read with the
    /// rest: with `pid`, it names the process and no other, also after the pid is reused (nil when it
    /// could not be read).
    package var started: UInt64?
    /// The executable, when it could be read (nil otherwise; `doubts` then says why).
    package var executable: Executable?
    /// A Flatpak application's id, from `/.flatpak-info` inside a sandbox the process really is in.
    package var flatpakID: String?
    /// A snap's name, from its AppArmor label (`snap.NAME.APP`).
    package var snapName: String?
    /// Reasons not to trust `executable` as an application's identity; empty when there are none.
    /// Sandbox identities (`flatpakID`, `snapName`) do not depend on them: the sandbox keeps other
    /// processes of the user from tampering with the application.
    package var doubts: [Doubt]

    package init(
        uid: UInt32, pid: Int32, executable: Executable? = nil, flatpakID: String? = nil, snapName: String? = nil,
        doubts: [Doubt] = []
    ) {
        self.uid = uid
        self.pid = pid
        self.executable = executable
        self.flatpakID = flatpakID
        self.snapName = snapName
        self.doubts = doubts
    }
}
