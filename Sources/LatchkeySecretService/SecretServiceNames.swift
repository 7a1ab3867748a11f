/// Every D-Bus name the Secret Service uses, in one place (docs/SECRET-SERVICE.md §6).
enum SS {
    static let busName = "org.freedesktop.secrets"
    static let root = "/org/freedesktop/secrets"
    static let collectionPrefix = root + "/collection"
    static let aliasPrefix = root + "/aliases"
    static let sessionPrefix = root + "/session"
    static let promptPrefix = root + "/prompt"
    /// "No object" / "no prompt needed".
    static let noObject = "/"

    enum Interface {
        static let service = "org.freedesktop.Secret.Service"
        static let collection = "org.freedesktop.Secret.Collection"
        static let item = "org.freedesktop.Secret.Item"
        static let session = "org.freedesktop.Secret.Session"
        static let prompt = "org.freedesktop.Secret.Prompt"
        static let properties = "org.freedesktop.DBus.Properties"
        static let introspectable = "org.freedesktop.DBus.Introspectable"
        static let peer = "org.freedesktop.DBus.Peer"
    }

    enum ErrorName {
        static let isLocked = "org.freedesktop.Secret.Error.IsLocked"
        static let noSession = "org.freedesktop.Secret.Error.NoSession"
        static let noSuchObject = "org.freedesktop.Secret.Error.NoSuchObject"
        static let invalidArgs = "org.freedesktop.DBus.Error.InvalidArgs"
        static let notSupported = "org.freedesktop.DBus.Error.NotSupported"
        static let unknownProperty = "org.freedesktop.DBus.Error.UnknownProperty"
        static let failed = "org.freedesktop.DBus.Error.Failed"
        static let limitsExceeded = "org.freedesktop.DBus.Error.LimitsExceeded"
        static let accessDenied = "org.freedesktop.DBus.Error.AccessDenied"
    }

    /// Property names used in `CreateItem`/`CreateCollection` dictionaries.
    enum Property {
        static let itemLabel = "org.freedesktop.Secret.Item.Label"
        static let itemAttributes = "org.freedesktop.Secret.Item.Attributes"
        static let collectionLabel = "org.freedesktop.Secret.Collection.Label"
    }

    enum Algorithm {
        static let plain = "plain"
        static let dh = "dh-ietf1024-sha256-aes128-cbc-pkcs7"
    }

    static let daemon = "org.freedesktop.DBus"
    static let daemonPath = "/org/freedesktop/DBus"

    /// xdg-desktop-portal's Secret backend (docs/PORTAL.md), served where gnome-keyring serves it.
    enum Portal {
        /// The object every portal backend serves its interfaces at.
        static let path = "/org/freedesktop/portal/desktop"
        /// Where xdg-desktop-portal puts the `handle` of each request (`src/xdp-request.c`).
        static let requestPrefix = path + "/request"
        static let secret = "org.freedesktop.impl.portal.Secret"
        static let request = "org.freedesktop.impl.portal.Request"
        /// The name xdg-desktop-portal owns; only its owner may retrieve secrets.
        static let desktop = "org.freedesktop.portal.Desktop"
    }
}
