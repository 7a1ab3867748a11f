import LatchkeyApplications

#if canImport(Glibc)
    import Glibc
#endif

/// Who may retrieve Flatpak applications' portal secrets (docs/PORTAL.md): decided here, in the
/// agent's one place of policy, through the application files in force, like every access group.
extension CallerPolicy {
    /// Only a host program of the user whose executable an application file names with
    /// `Privileges=PortalSecrets` (the same device and inode, at that path, without doubts: not traced,
    /// no loader variables, not replaced), as `ApplicationRegistry.grant` decides. A sandboxed caller
    /// never: its file may not carry privileges, and the check of the basis below says so again.
    package func mayRetrievePortalSecrets(_ identity: CallerIdentity?) -> Bool {
        guard let identity, identity.uid == getuid() else { return false }
        let grant = applications.current().grant(for: identity)
        guard case .executable = grant.basis else { return false }
        return grant.privileges.contains(.portalSecrets)
    }
}
