/// What an application file may grant a program besides access groups (`Privileges=`,
/// docs/APPLICATIONS.md). Each is a power over other applications' secrets, so each is granted only
/// to a host program named by `Executable=`, under the same ownership rules as its groups, and the
/// agent asks for it by name where it is needed (`CallerPolicy`).
package enum ApplicationPrivilege: String, Sendable, Hashable, CaseIterable {
    /// `PortalSecrets`: the program may ask the Secret Service for any Flatpak application's portal
    /// secret (`org.freedesktop.impl.portal.Secret.RetrieveSecret`, docs/PORTAL.md). Meant for
    /// xdg-desktop-portal alone, which tells the application's id from its sandbox.
    case portalSecrets = "PortalSecrets"
}
