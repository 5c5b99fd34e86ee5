// The version of HomeMQTT: `homemqtt --version`, and the `sw_version` Home Assistant shows.

public enum HomeMQTTVersion {
    public static let current = "0.10.0"
}
