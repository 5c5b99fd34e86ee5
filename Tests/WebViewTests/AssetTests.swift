import Foundation
import TestSupport
import XCTest

@testable import WebView

/// The page's files are compiled into the binary from `Sources/WebView/Assets` by
/// `Scripts/embed-assets.py`: the generated file must say what the assets say.
final class AssetTests: XCTestCase {
    let assets = repositoryRoot.appendingPathComponent("Sources/WebView/Assets")

    func testGeneratedFileMatchesTheAssets() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: assets.path).sorted()
        XCTAssertEqual(
            WebAssets.names, files,
            "Sources/WebView/Assets+Generated.swift is out of date with the assets: run Scripts/embed-assets.py")
        for name in files {
            let text = try String(contentsOf: assets.appendingPathComponent(name), encoding: .utf8)
            XCTAssertEqual(
                WebAssets.named(name)?.text, text,
                "\(name) changed since Scripts/embed-assets.py last ran: run it again")
        }
    }

    /// The script agrees (the same check, as a build step would run it).
    func testEmbedScriptCheckPasses() async throws {
        let result = try await runProcess(
            "python3", [repositoryRoot.appendingPathComponent("Scripts/embed-assets.py").path, "--check"])
        XCTAssertEqual(result.status, 0, result.standardError)
    }

    /// Nothing is fetched from elsewhere: the page works on a network with no internet.
    func testPagesLoadNothingFromOtherHosts() throws {
        for name in WebAssets.names {
            // An SVG's namespace is a name, not an address anything loads.
            let text = try XCTUnwrap(WebAssets.named(name)?.text).replacingOccurrences(
                of: "xmlns=\"http://www.w3.org/2000/svg\"", with: "")
            for pattern in ["http://", "https://", "//cdn", "@import url("] {
                XCTAssertFalse(text.contains(pattern), "\(name) refers to \(pattern)")
            }
        }
        let index = try XCTUnwrap(WebAssets.named("index.html")?.text)
        let scripts = index.components(separatedBy: "<script src=\"/assets/").dropFirst().compactMap {
            $0.split(separator: "\"").first.map(String.init)
        }
        XCTAssertFalse(scripts.isEmpty)
        for script in scripts { XCTAssertNotNil(WebAssets.named(script), "index.html loads \(script), not embedded") }
    }
}
