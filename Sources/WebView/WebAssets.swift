/// The page's files, compiled into the binary (`Assets+Generated.swift`, written by
/// `Scripts/embed-assets.py` from `Sources/WebView/Assets`): the binary copied alone to
/// `/usr/local/bin` serves the whole page, on a network with no internet.
enum WebAssets {
    struct Asset: Sendable {
        /// A digest of the content: a reload after an upgrade fetches the new file.
        var etag: String
        var text: String
    }

    static func named(_ name: String) -> Asset? { generated[name] }

    static var names: [String] { generated.keys.sorted() }

    static func contentType(_ name: String) -> String {
        switch name.split(separator: ".").last ?? "" {
        case "html": "text/html; charset=utf-8"
        case "css": "text/css; charset=utf-8"
        case "js": "text/javascript; charset=utf-8"
        case "svg": "image/svg+xml"
        case "json": "application/json"
        default: "text/plain; charset=utf-8"
        }
    }
}
