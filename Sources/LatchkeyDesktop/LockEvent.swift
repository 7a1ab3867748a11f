/// A change of the desktop's lock or power state, as reported by `LockWatcher`.
///
/// Events are hints to lock, never proof of identity: `unlocked` only says that a screen locker or logind
/// announced an unlock. Anything holding secrets must not treat it as authentication; unlocking keys always
/// needs the password (or another real credential). The same lock may be reported more than once (logind's
/// `Lock` signal and its `LockedHint`, or a screen saver that emits on two paths), so act idempotently.
package enum LockEvent: Sendable, Equatable {
    /// The session was locked, or a screen saver became active. `source` says who reported it:
    /// `login1.Lock`, `login1.LockedHint`, or the screen saver's bus name (`org.gnome.ScreenSaver`, …).
    case locked(source: String)
    /// The session was unlocked or the screen saver ended (`login1.Unlock`, `login1.LockedHint`, or a
    /// screen saver's bus name). Never a reason to unlock anything by itself; see the type's comment.
    case unlocked(source: String)
    /// logind announced that the machine is about to suspend or hibernate (`PrepareForSleep(true)`).
    case preparingForSleep
    /// logind announced that the machine woke up (`PrepareForSleep(false)`).
    case resumed
}
