// The catalog of standard HAP service and characteristic types and accessory categories, looked up
// by UUID, name or alias; the table itself is in Catalog+Generated.swift.

/// A standard (Apple-defined) characteristic type.
public struct CharacteristicType: Sendable, Hashable {
    /// Long, upper-case UUID.
    public let uuid: String
    /// Stable kebab-case name, after HomeKit's `HMCharacteristicType*` constant where one exists.
    public let name: String
    /// HAP-python's name for the type (`On`, `TargetDoorState`).
    public let hapName: String
    /// The metadata HAP defines for the type; accessories may narrow it.
    public let metadata: CharacteristicMetadata

    public init(uuid: String, name: String, hapName: String, metadata: CharacteristicMetadata) {
        self.uuid = uuid
        self.name = name
        self.hapName = hapName
        self.metadata = metadata
    }
}

/// A standard (Apple-defined) service type.
public struct ServiceType: Sendable, Hashable {
    public let uuid: String
    /// Stable kebab-case name, after HomeKit's `HMServiceType*` constant where one exists.
    public let name: String
    public let hapName: String
    /// Long UUIDs of the characteristic types the service must have.
    public let requiredCharacteristics: [String]
    public let optionalCharacteristics: [String]

    public init(
        uuid: String, name: String, hapName: String, requiredCharacteristics: [String],
        optionalCharacteristics: [String]
    ) {
        self.uuid = uuid
        self.name = name
        self.hapName = hapName
        self.requiredCharacteristics = requiredCharacteristics
        self.optionalCharacteristics = optionalCharacteristics
    }
}

/// The catalog of standard HAP types, generated from HAP-python's catalog by
/// `Scripts/generate-catalog.py` into `Catalog+Generated.swift`.
public enum Catalog {
    public static let characteristicTypes: [CharacteristicType] = generatedCharacteristicTypes
    public static let serviceTypes: [ServiceType] = generatedServiceTypes
    /// HAP accessory categories (1–33) by number, kebab-case names.
    public static let categories: [Int: String] = generatedCategories

    /// By short (`25`) or long UUID, any case.
    public static func characteristicType(uuid: String) -> CharacteristicType? {
        characteristicsByUUID[StandardUUID.longForm(uuid)]
    }

    /// By kebab name (`power-state`), the kebab form of the HAP name (`on`) or the HAP name
    /// (`On`), case-insensitive.
    public static func characteristicType(named name: String) -> CharacteristicType? {
        characteristicsByName[name.lowercased()]
    }

    /// By short or long UUID. HAP's television speaker shares the speaker's UUID: this finds `speaker`.
    public static func serviceType(uuid: String) -> ServiceType? {
        servicesByUUID[StandardUUID.longForm(uuid)]
    }

    public static func serviceType(named name: String) -> ServiceType? {
        servicesByName[name.lowercased()]
    }

    /// By kebab name (`garage-door-opener`), a common alias (`alarm-system`, `camera`) or the
    /// number itself (`"4"`).
    public static func category(named name: String) -> Int? {
        let key = name.lowercased()
        if let number = Int(key), categories[number] != nil { return number }
        return categoriesByName[key]
    }

    /// A type's kebab name, or nil for a custom type.
    public static func characteristicName(uuid: String) -> String? { characteristicType(uuid: uuid)?.name }
    public static func serviceName(uuid: String) -> String? { serviceType(uuid: uuid)?.name }

    // Built once, on first use (static lets are lazy and thread-safe).
    private static let characteristicsByUUID: [String: CharacteristicType] =
        Dictionary(characteristicTypes.map { ($0.uuid, $0) }, uniquingKeysWith: { first, _ in first })

    private static let characteristicsByName: [String: CharacteristicType] = {
        var index: [String: CharacteristicType] = [:]
        for type in characteristicTypes {
            index[type.hapName.lowercased()] = type
            index[type.name] = type
        }
        for (alias, short) in generatedCharacteristicAliases {
            index[alias] = characteristicsByUUID[StandardUUID.longForm(short)]
        }
        return index
    }()

    private static let servicesByUUID: [String: ServiceType] =
        Dictionary(serviceTypes.map { ($0.uuid, $0) }, uniquingKeysWith: { first, _ in first })

    private static let servicesByName: [String: ServiceType] = {
        var index: [String: ServiceType] = [:]
        for type in serviceTypes {
            index[type.hapName.lowercased()] = type
            index[type.name] = type
        }
        for (alias, short) in generatedServiceAliases {
            index[alias] = servicesByUUID[StandardUUID.longForm(short)]
        }
        return index
    }()

    private static let categoriesByName: [String: Int] = {
        var index = generatedCategoryAliases
        for (number, name) in categories { index[name] = number }
        return index
    }()

    // Compact constructors for the generated table.
    static func c(
        _ short: String, _ name: String, _ hapName: String, _ format: CharacteristicFormat, _ permissions: String,
        unit: String? = nil, min: Double? = nil, max: Double? = nil, step: Double? = nil,
        values: [Int64: String] = [:], maxLength: Int? = nil
    ) -> CharacteristicType {
        var perms: CharacteristicPermissions = []
        for code in permissions.split(separator: " ") {
            if let hit = CharacteristicPermissions.codes.first(where: { $0.0 == code }) { perms.insert(hit.1) }
        }
        return CharacteristicType(
            uuid: StandardUUID.longForm(short), name: name, hapName: hapName,
            metadata: CharacteristicMetadata(
                format: format, unit: unit, minValue: min, maxValue: max, minStep: step,
                validValues: values, maxLength: maxLength, permissions: perms
            )
        )
    }

    static func s(_ short: String, _ name: String, _ hapName: String, required: [String], optional: [String])
        -> ServiceType
    {
        ServiceType(
            uuid: StandardUUID.longForm(short), name: name, hapName: hapName,
            requiredCharacteristics: required.map(StandardUUID.longForm),
            optionalCharacteristics: optional.map(StandardUUID.longForm)
        )
    }
}
