public import Foundation

// The config file's parts that other modules read themselves: an output's section
// (`homeassistant:`, `homie:`, `web:`), each read by the module that serves it. The core reads
// only its own keys; the composition root lists the sections, and a key no section reads is an
// unknown key, as anywhere else in the file.

/// A part of the config file read by the module it configures.
public protocol ConfigSection: Sendable {
    /// The settings when the file says nothing of them.
    init()
    /// Reads its keys from the file's top level (`top.reader("homie")`, `top.bool(…)`), strictly:
    /// a section that reads a mapping finishes it, so a misspelt key inside is named.
    static func read(_ top: ConfigReader, _ context: ConfigContext) throws(ConfigError) -> Self
}

/// What a section may need beside its keys.
public struct ConfigContext: Sendable {
    public var file: String
    /// `HOMEMQTT_*` variables and `STATE_DIRECTORY`.
    public var environment: [String: String]
    /// The directory relative paths in the file are relative to.
    public var directory: String

    /// A path from the file, made absolute against the file's directory.
    public func resolve(_ path: String) -> String {
        if path.hasPrefix("/") || directory.isEmpty { return path }
        return (directory as NSString).appendingPathComponent(path)
    }
}

/// The sections read from one file, by type; a section the file did not read is its default.
public struct ConfigSections: Sendable {
    private var values: [ObjectIdentifier: any ConfigSection] = [:]

    public init() {}

    public subscript<Section: ConfigSection>(_ type: Section.Type) -> Section {
        get { values[ObjectIdentifier(type)] as? Section ?? Section() }
        set { values[ObjectIdentifier(type)] = newValue }
    }

    mutating func read(_ type: any ConfigSection.Type, _ top: ConfigReader, _ context: ConfigContext)
        throws(ConfigError)
    {
        values[ObjectIdentifier(type)] = try type.read(top, context)
    }
}

extension GatewayConfig {
    /// One section's settings: `config[HomieConfig.self].enabled`.
    public subscript<Section: ConfigSection>(_ type: Section.Type) -> Section {
        get { sections[type] }
        set { sections[type] = newValue }
    }
}
