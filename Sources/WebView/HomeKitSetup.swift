import HTTPTypes
import Hummingbird
import NIOCore
import SetupQR

// The served home's HomeKit bridge setup, as the web view shows it to an administrator: the
// code, the `X-HM://` URI and its QR code as an SVG image (`/api/homekit/setup.svg`), so the
// Home app's camera pairs from the screen.

/// A bridge's setup code and setup URI (`X-HM://…`), handed in by the composition root.
public struct HomeKitSetup: Sendable, Equatable {
    public var code: String
    public var uri: String

    public init(code: String, uri: String) {
        self.code = code
        self.uri = uri
    }

    /// The URI's QR code as an SVG image: no cache (it is a secret), and, opened on its own, a
    /// document that may load and run nothing.
    func svgResponse() throws -> Response {
        guard let matrix = QRMatrix(encoding: uri) else {
            throw WebError(status: .internalServerError, code: .internal, message: "no QR code holds '\(uri)'")
        }
        var response = WebRoutes.response(.ok, ByteBuffer(string: matrix.svg()), type: "image/svg+xml")
        response.headers[.contentSecurityPolicy] = "default-src 'none'; style-src 'unsafe-inline'"
        response.headers[.xContentTypeOptions] = "nosniff"
        return response
    }
}
