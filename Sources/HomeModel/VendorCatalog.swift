// Vendor characteristics that real accessories carry beside Apple's types: what they measure or
// set, in which unit, so that front ends can name them. The UUIDs and meanings are the ones
// aiohomekit and Home Assistant's HomeKit controller use for these devices (facts of the
// devices, written here by hand); Apple's own types are in the generated catalog.

/// A vendor characteristic: who defines it, a kebab name, a label for people, and its unit.
public struct VendorCharacteristicType: Sendable, Hashable {
    /// What a reading is: a value now, or a total that only grows (energy counters).
    public enum Reading: Sendable, Hashable {
        case measurement, total, setting
    }

    public var uuid: String
    public var vendor: String
    /// `eve-voltage`.
    public var name: String
    /// `Voltage`.
    public var label: String
    /// The unit's symbol (`V`, `A`, `W`, `kWh`, `hPa`, `dB`, `%`, `m`, `s`), nil for none.
    public var unit: String?
    public var reading: Reading
}

public enum VendorCatalog {
    private static let eveSuffix = "-079E-48FF-8F27-9C2605A29F52"
    private static let connectSenseSuffix = "-0000-1000-8000-001D4B474349"

    private static func t(
        _ uuid: String, _ vendor: String, _ name: String, _ label: String, _ unit: String?,
        _ reading: VendorCharacteristicType.Reading
    ) -> VendorCharacteristicType {
        VendorCharacteristicType(uuid: uuid, vendor: vendor, name: name, label: label, unit: unit, reading: reading)
    }

    public static let types: [VendorCharacteristicType] = [
        t("E863F10A" + eveSuffix, "Eve", "eve-voltage", "Voltage", "V", .measurement),
        t("E863F126" + eveSuffix, "Eve", "eve-current", "Current", "A", .measurement),
        t("E863F10D" + eveSuffix, "Eve", "eve-power", "Power", "W", .measurement),
        t("E863F10C" + eveSuffix, "Eve", "eve-total-consumption", "Total consumption", "kWh", .total),
        t("E863F10F" + eveSuffix, "Eve", "eve-air-pressure", "Air pressure", "hPa", .measurement),
        t("E863F12E" + eveSuffix, "Eve", "eve-valve-position", "Valve position", "%", .measurement),
        t("E863F130" + eveSuffix, "Eve", "eve-elevation", "Elevation", "m", .setting),
        t("E863F120" + eveSuffix, "Eve", "eve-motion-sensitivity", "Motion sensitivity", nil, .setting),
        t("E863F12D" + eveSuffix, "Eve", "eve-motion-duration", "Motion duration", "s", .setting),
        t("4AAAF931-0DEC-11E5-B939-0800200C9A66", "Koogeek", "koogeek-power", "Power", "W", .measurement),
        t("7BBBA96E-EB2D-11E5-A837-0800200C9A66", "Koogeek", "koogeek-power", "Power", "W", .measurement),
        t("FC093458-18F0-4B1D-8360-BB68A3FCC9C5", "VOCOlinc", "vocolinc-power", "Power", "W", .measurement),
        t("69D52519-0A4E-4898-8335-4739F9116D0A", "VOCOlinc", "vocolinc-spray-level", "Spray level", nil, .setting),
        t("00000004" + connectSenseSuffix, "ConnectSense", "connectsense-current", "Current", "A", .measurement),
        t("00000008" + connectSenseSuffix, "ConnectSense", "connectsense-voltage", "Voltage", "V", .measurement),
        t("00000009" + connectSenseSuffix, "ConnectSense", "connectsense-current", "Current", "A", .measurement),
        t("0000000A" + connectSenseSuffix, "ConnectSense", "connectsense-power", "Power", "W", .measurement),
        t(
            "0000000C" + connectSenseSuffix, "ConnectSense", "connectsense-total-consumption", "Total consumption",
            "kWh", .total),
        t("B3BBFABC-D78C-5B8D-948C-5DAC1EE2CDE5", "Netatmo", "netatmo-noise", "Noise", "dB", .measurement),
        t("EE56B186-B0D3-528E-8C79-C21FC9BCF437", "Aqara", "aqara-volume", "Volume", "%", .setting),
        t("EE56B186-B0D3-488E-8C79-C21FC9BCF437", "Aqara", "aqara-volume", "Volume", "%", .setting),
        t("B1C09E4C-E202-4827-B343-B0F32F727CFF", "Aqara", "aqara-pairing-mode", "Pairing mode", nil, .setting),
        t("B1C09E4C-E202-4827-B863-B0F32F727CFF", "Aqara", "aqara-pairing-mode", "Pairing mode", nil, .setting),
        t(
            "E4489BBC-5227-4569-93E5-B345E3E5508F", "ecobee", "ecobee-home-heat-target", "Home heat target", "°C",
            .setting),
        t(
            "7D381BAA-20F9-40E5-9BE9-AEB92D4BECEF", "ecobee", "ecobee-home-cool-target", "Home cool target", "°C",
            .setting),
        t(
            "05B97374-6DC0-439B-A0FA-CA33F612D425", "ecobee", "ecobee-sleep-heat-target", "Sleep heat target", "°C",
            .setting),
        t(
            "A251F6E7-AC46-4190-9C5D-3D06277BDF9F", "ecobee", "ecobee-sleep-cool-target", "Sleep cool target", "°C",
            .setting),
        t(
            "73AAB542-892A-4439-879A-D2A883724B69", "ecobee", "ecobee-away-heat-target", "Away heat target", "°C",
            .setting),
        t(
            "5DA985F0-898A-4850-B987-B76C6C78D670", "ecobee", "ecobee-away-cool-target", "Away cool target", "°C",
            .setting),
        t("B7DDB9A3-54BB-4572-91D2-F1F5B0510F8C", "ecobee", "ecobee-current-mode", "Current mode", nil, .measurement),
        t("FA128DE6-9D7D-49A4-B6D8-4E4E234DEE38", "ecobee", "ecobee-clear-hold", "Clear hold", nil, .setting),
        t("00000006-5E50-11EC-B400-0A80FF2603DE", "Airversa", "airversa-sleep-mode", "Sleep mode", nil, .setting),
    ]

    private static let byUUID: [String: VendorCharacteristicType] = Dictionary(
        types.map { ($0.uuid, $0) }, uniquingKeysWith: { first, _ in first })

    /// The vendor type of `uuid` (any case), nil when it is not one of ours.
    public static func characteristicType(uuid: String) -> VendorCharacteristicType? {
        byUUID[uuid.uppercased()]
    }
}
